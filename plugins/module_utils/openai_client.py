# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Client for vLLM's OpenAI-compatible API: the standard library plus Ansible's open_url.

Two parts:
- `request_json`: one blocking request through Ansible's
  `ansible.module_utils.urls.Request` (what `open_url` calls), for health probes, smoke checks and
  /metrics. A refused connection is reported, not raised.
- `run_streams`: many streaming requests at once on one thread, driven by
  `selectors` over non-blocking sockets. Each server-sent event is stamped with
  `time.perf_counter()` when its bytes arrive, the same way vLLM's own
  benchmark client stamps them, and the final `usage` chunk (requested through
  `stream_options.include_usage`) gives the token count. One thread and no
  per-event thread switch is what lets one core ingest tens of thousands of
  events per second (see tests/benchmarks/client_capacity.py).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import errno
import json
import selectors
import socket
import ssl
import time
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit

from ansible.module_utils.basic import env_fallback
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import Request, make_context

# The API key option of every module that talks to the server. Unset, it is read from the
# controller's VLLM_API_KEY (how AWX injects the credential), so playbooks never pass the
# value as a task argument, where it would show in job events with DISPLAY_ARGS_TO_STDOUT.
API_KEY_SPEC = {"type": "str", "no_log": True, "fallback": (env_fallback, ["VLLM_API_KEY"])}

# The TLS options of every module that talks to the server, for an https:// URL (vllm_gateway with a certificate):
# check the server's certificate (against the system's CAs, or ca_path's), as ansible.builtin.uri does.
TLS_SPEC = {"validate_certs": {"type": "bool", "default": True}, "ca_path": {"type": "path"}}


def api_argument_spec():
    """The options every module that talks to the server takes, as the http_api doc fragment documents them: where,
    which model, the key, TLS. Each module's argument spec starts with these."""
    return {"url": {"type": "str", "required": True}, "model": {"type": "str", "required": True},
            "api_key": dict(API_KEY_SPEC), "validate_certs": dict(TLS_SPEC["validate_certs"]),
            "ca_path": dict(TLS_SPEC["ca_path"])}


def tls_options(params):
    """The TLS options out of a module's (or action plugin's) validated parameters."""
    return {"validate_certs": params.get("validate_certs", True), "ca_path": params.get("ca_path")}


def ssl_context(tls=None):
    """The client context for ``tls`` (tls_options): the system's CAs or ca_path's, no checks without validate_certs."""
    tls = tls or {}
    context = ssl.create_default_context(cafile=tls.get("ca_path"))
    if not tls.get("validate_certs", True):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


# open_url's own SSL context for each (validate_certs, ca_path), made once per process: open_url makes a new one for
# every request, even an http:// one, and loading the system's CAs took about 0.2 s of CPU each time (a sweep asks
# /tokenize once per prompt). The same make_context call open_url makes, so a request is checked the same way.
_OPEN_URL_CONTEXTS = {}


def _open_url_context(tls):
    key = (tls.get("validate_certs", True), tls.get("ca_path"))
    if key not in _OPEN_URL_CONTEXTS:
        _OPEN_URL_CONTEXTS[key] = make_context(cafile=key[1], validate_certs=key[0])
    return _OPEN_URL_CONTEXTS[key]


class Response:
    """Outcome of one blocking request. `status` is None when no HTTP answer came back."""

    def __init__(self, status=None, body=None, text="", error=None, refused=False, elapsed=0.0):
        self.status = status
        self.body = body
        self.text = text
        self.error = error
        self.refused = refused
        self.elapsed = elapsed

    @property
    def ok(self):
        return self.status is not None and 200 <= self.status < 300

    def summary(self, limit=2000):
        """A short, log-safe description for failure messages."""
        if self.status is None:
            return "no HTTP response: %s" % self.error
        return "HTTP %s: %s" % (self.status, (self.text or "")[:limit])


def join_url(base, path):
    return base.rstrip("/") + "/" + path.lstrip("/")


def headers_for(api_key=None, json_body=True):
    headers = {"Accept": "application/json"}
    if json_body:
        headers["Content-Type"] = "application/json"
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    return headers


def _is_refused(reason):
    if isinstance(reason, ConnectionRefusedError):
        return True
    return getattr(reason, "errno", None) in (errno.ECONNREFUSED,)


def request_json(url, method="GET", body=None, api_key=None, timeout=30.0, tls=None):
    """One request; JSON bodies are parsed when possible. Never raises on HTTP or socket errors.

    ``tls`` (tls_options) applies to an https:// URL."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    tls = tls or {}
    started = time.monotonic()
    try:
        # ~/.netrc must not add credentials of its own; the API key is the only one sent.
        # open_url's request, with the context made once (_open_url_context).
        with Request().open(method, url, data=data, headers=headers_for(api_key, body is not None), timeout=timeout,
                            use_netrc=False, validate_certs=tls.get("validate_certs", True), ca_path=tls.get("ca_path"),
                            context=_open_url_context(tls)) as resp:
            status, raw = resp.status, resp.read()
    except HTTPError as exc:
        status, raw = exc.code, exc.read() or b""
    except URLError as exc:
        return Response(error=str(exc.reason), refused=_is_refused(exc.reason),
                        elapsed=time.monotonic() - started)
    except (OSError, ValueError, UrlsConnectionError) as exc:
        return Response(error=str(exc) or exc.__class__.__name__, refused=_is_refused(exc),
                        elapsed=time.monotonic() - started)
    text = raw.decode("utf-8", "replace")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    return Response(status=status, body=parsed, text=text, elapsed=time.monotonic() - started)


# --------------------------------------------------------------------------- streaming


class StreamOutput:
    """What one streamed request produced; field names follow vLLM's RequestFuncOutput."""

    __slots__ = ("index", "success", "error", "status", "start_time", "ttft", "itl", "latency",
                 "output_tokens", "prompt_len", "generated_text", "chunks", "end_time", "response_text")

    def __init__(self, index):
        self.index = index
        self.success = False
        self.error = ""
        self.status = None
        self.start_time = 0.0
        self.ttft = 0.0
        self.itl = []
        self.latency = 0.0
        self.output_tokens = None
        self.prompt_len = 0
        self.generated_text = ""
        self.chunks = 0
        self.end_time = 0.0
        self.response_text = ""

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}


class SSEAccumulator:
    """Turns server-sent events of an OpenAI stream into a StreamOutput.

    Mirrors vLLM's benchmark client: the first event with non-empty `choices`
    sets TTFT, every later one appends its gap to ITL (so an event carrying
    several tokens, as under speculative decoding, is one gap), and an event
    with `usage` sets `output_tokens`.
    """

    __slots__ = ("out", "_last", "_pieces", "_buffer", "done")

    def __init__(self, out, start):
        self.out = out
        out.start_time = start
        self._last = start
        self._pieces = []
        self._buffer = b""
        self.done = False

    def feed(self, data, now):
        buffer = self._buffer + data if self._buffer else data
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        start = 0
        while True:
            end = buffer.find(b"\n\n", start)
            if end < 0:
                break
            self._event(buffer[start:end], now)
            start = end + 2
        self._buffer = buffer[start:]

    def _event(self, raw, now):
        for line in raw.split(b"\n"):
            if not line.startswith(b"data:"):
                continue  # comments (": ping"), event names, ids
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                continue
            try:
                data = json.loads(payload)
            except ValueError:
                self.out.error = "unparseable event: %r" % payload[:200]
                continue
            out = self.out
            if "error" in data and not data.get("choices"):
                err = data["error"]
                out.error = err.get("message", str(err)) if isinstance(err, dict) else str(err)
                continue
            choices = data.get("choices")
            if choices:
                choice = choices[0]
                delta = choice.get("delta")
                text = choice.get("text") or "" if delta is None else \
                    delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""
                if out.chunks == 0:
                    out.ttft = now - out.start_time
                else:
                    out.itl.append(now - self._last)
                self._last = now
                out.chunks += 1
                if text:
                    self._pieces.append(text)
            usage = data.get("usage")
            if usage:
                out.output_tokens = usage.get("completion_tokens")
                if usage.get("prompt_tokens") is not None:
                    out.prompt_len = usage["prompt_tokens"]

    def finish(self, clean):
        """Close the record. A stream that never produced a token, or broke off, is a failure."""
        out = self.out
        out.generated_text = "".join(self._pieces)
        out.latency = self._last - out.start_time
        if out.chunks == 0:
            out.success = False
            out.error = out.error or "never received a token (no chunk with choices)"
        elif not clean and not self.done:
            out.success = False
            out.error = out.error or "stream ended before [DONE] after %d chunks" % out.chunks
        else:
            out.success = not out.error
        return out


class _Conn:
    """One in-flight HTTP/1.1 request on a non-blocking socket, decoding chunked transfer."""

    __slots__ = ("sock", "out", "acc", "request", "sent", "head", "status", "chunked", "length", "body_seen",
                 "chunk_left", "raw", "error_body", "closed")

    def __init__(self, sock, out, request):
        self.sock = sock
        self.out = out
        self.acc = None
        self.request = request
        self.sent = 0
        self.head = b""
        self.status = None
        self.chunked = False
        self.length = None
        self.body_seen = 0
        self.chunk_left = 0
        self.raw = b""
        self.error_body = []
        self.closed = False

    def on_body(self, data, now):
        if self.status == 200:
            self.acc.feed(data, now)
        else:
            self.error_body.append(data)

    def on_bytes(self, data, now):
        """Feed raw socket bytes; returns True when the response is complete."""
        if self.status is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return False
            header_block, data = self.head[:end], self.head[end + 4:]
            lines = header_block.split(b"\r\n")
            self.status = int(lines[0].split()[1])
            self.out.status = self.status
            for line in lines[1:]:
                name, _colon, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"transfer-encoding" and b"chunked" in value.lower():
                    self.chunked = True
                elif name == b"content-length":
                    self.length = int(value.strip())
            if not data:
                return self.length == 0
        if not self.chunked:
            self.body_seen += len(data)
            self.on_body(data, now)
            return self.length is not None and self.body_seen >= self.length
        raw = self.raw + data if self.raw else data
        pos = 0
        size = len(raw)
        while pos < size:
            if self.chunk_left > 0:
                take = min(self.chunk_left, size - pos)
                self.on_body(raw[pos:pos + take], now)
                pos += take
                self.chunk_left -= take
                if self.chunk_left == 0:
                    self.chunk_left = -2  # the CRLF after a chunk
                continue
            if self.chunk_left < 0:
                take = min(-self.chunk_left, size - pos)
                pos += take
                self.chunk_left += take
                continue
            eol = raw.find(b"\r\n", pos)
            if eol < 0:
                break
            chunk_size = int(raw[pos:eol].split(b";")[0], 16)
            pos = eol + 2
            if chunk_size == 0:
                self.raw = b""
                return True
            self.chunk_left = chunk_size
        self.raw = raw[pos:]
        return False


def _request_bytes(host, port, path, body, api_key):
    payload = json.dumps(body).encode("utf-8")
    lines = ["POST %s HTTP/1.1" % path, "Host: %s:%s" % (host, port), "Content-Type: application/json",
             "Accept: text/event-stream", "Content-Length: %d" % len(payload), "Connection: close"]
    if api_key:
        lines.append("Authorization: Bearer %s" % api_key)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


def _reachable_address(host, port, timeout=10.0):
    """The first of host's addresses that accepts a connection, as socket.create_connection tries them.

    "localhost" resolves to ::1 before 127.0.0.1 on many hosts while vLLM binds 0.0.0.0 (IPv4 only): the
    streams must not all go to the address that refuses. With none reachable, the first address is returned
    and every stream reports its own connect error.
    """
    addresses = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    try:
        with socket.create_connection((host, port), timeout=timeout) as probe:
            peer = probe.getpeername()
    except OSError:
        return addresses[0]
    return next((a for a in addresses if a[4][:2] == peer[:2]), addresses[0])


def _open_socket(address, host, context, timeout):
    """(socket, error) for one stream: a non-blocking connect under way, or with ``context`` a TLS connection
    whose handshake is done (blocking; it counts in the stream's time to first token, as a new connection's
    handshake does for any client), switched to non-blocking. ``error`` names what failed; the caller closes it."""
    sock = socket.socket(address[0], socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if context is None:
        sock.setblocking(False)
        code = sock.connect_ex(address[4])
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            return sock, "connect: %s" % errno.errorcode.get(code, code)
        return sock, None
    sock.settimeout(min(timeout, 30.0))
    try:
        sock.connect(address[4])
        sock = context.wrap_socket(sock, server_hostname=host)
    except (OSError, ssl.SSLError) as exc:
        return sock, "tls: %s" % exc
    sock.setblocking(False)
    return sock, None


def _recv(sock):
    """Bytes from a non-blocking socket, with whatever TLS has already decrypted (select does not see that);
    None when nothing is ready yet."""
    try:
        data = sock.recv(262144)
        while data and isinstance(sock, ssl.SSLSocket) and sock.pending():
            data += sock.recv(262144)
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return None
    return data


def run_streams(url, payloads, api_key=None, concurrency=None, timeout=600.0, on_done=None, tls=None):
    """Stream every payload to url (a full /v1/... URL), at most `concurrency` at once.

    Returns (outputs in payload order, wall-clock duration from the first send to
    the last completion). Socket errors, non-200 answers and streams cut short
    become failed outputs with `error` set; nothing raises. An https:// URL is
    spoken over TLS with ``tls`` (tls_options): the certificate is checked before
    the request is sent.
    """
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    context = ssl_context(tls) if parts.scheme == "https" else None
    path = parts.path + ("?" + parts.query if parts.query else "")
    payloads = list(payloads)
    concurrency = len(payloads) if not concurrency else int(concurrency)
    outputs = [StreamOutput(i) for i in range(len(payloads))]
    address = _reachable_address(host, port)
    selector = selectors.DefaultSelector()
    pending = list(range(len(payloads) - 1, -1, -1))
    live = 0
    started = time.perf_counter()
    deadline = time.monotonic() + timeout

    def finish(conn, clean, error=None):
        out = conn.out
        if error and not out.error:
            out.error = error
        if conn.acc is not None:
            conn.acc.finish(clean)
        elif conn.status is not None and conn.status != 200:
            out.success = False
            out.response_text = b"".join(conn.error_body).decode("utf-8", "replace")[:4000]
            out.error = out.error or "HTTP %s: %s" % (conn.status, out.response_text[:500])
        else:
            out.success = False
        out.end_time = time.perf_counter()
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn.sock)
        conn.sock.close()
        conn.closed = True
        if on_done is not None:
            on_done(out)

    def launch():
        index = pending.pop()
        out = outputs[index]
        start = time.perf_counter()
        sock, error = _open_socket(address, host, context, timeout)
        conn = _Conn(sock, out, _request_bytes(host, port, path, payloads[index], api_key))
        conn.acc = SSEAccumulator(out, start)
        if error:
            conn.acc = None
            out.start_time = start
            finish(conn, False, error)
            return False
        selector.register(sock, selectors.EVENT_WRITE, conn)
        return True

    while pending or live:
        while pending and live < concurrency:
            if launch():
                live += 1
        if not live:
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            for key in list(selector.get_map().values()):
                finish(key.data, False, "timed out after %.0f s" % timeout)
            live = 0
            for index in pending:
                outputs[index].error = "not started: timed out"
            break
        for key, mask in selector.select(min(remaining, 1.0)):
            conn = key.data
            if mask & selectors.EVENT_WRITE:
                try:
                    sent = conn.sock.send(conn.request[conn.sent:])
                except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    continue
                except OSError as exc:
                    finish(conn, False, "send: %s" % exc)
                    live -= 1
                    continue
                conn.sent += sent
                if conn.sent >= len(conn.request):
                    selector.modify(conn.sock, selectors.EVENT_READ, conn)
                continue
            try:
                data = _recv(conn.sock)
            except OSError as exc:
                finish(conn, False, "recv: %s" % exc)
                live -= 1
                continue
            if data is None:
                continue
            now = time.perf_counter()
            if not data:
                if conn.status is not None and conn.status != 200:
                    conn.acc = None
                finish(conn, conn.acc is not None and conn.acc.done, None if conn.status else "connection closed")
                live -= 1
                continue
            try:
                complete = conn.on_bytes(data, now)
            except (ValueError, IndexError) as exc:
                finish(conn, False, "bad HTTP framing: %s" % exc)
                live -= 1
                continue
            if complete:
                if conn.status != 200:
                    conn.acc = None
                finish(conn, True)
                live -= 1
    selector.close()
    return outputs, time.perf_counter() - started
