"""A fast fake of vLLM's streaming OpenAI API, for client tests and the capacity benchmark.

Not vLLM: an asyncio HTTP/1.1 server that answers POST /v1/completions and
/v1/chat/completions with server-sent events of OpenAI shape (chunked transfer
encoding, like uvicorn), one event per "engine step" for every open stream, and
a final usage chunk when `stream_options.include_usage` is set. It also serves
/health, /v1/models, /metrics and /reset_prefix_cache.

Knobs (server-wide via the constructor, or per request via payload fields):
  tokens_per_chunk / x_tokens_per_chunk  tokens carried by one event (speculative decoding)
  step_delay                              seconds between engine steps (0 = as fast as possible)
  x_fail_after                            close the connection after this many events
  omit_usage / x_omit_usage               never send the usage chunk
Run standalone:  python fast_token_source.py PORT
"""
import asyncio
import contextlib
import json
import sys
import threading


class FastTokenSource:
    def __init__(self, host="127.0.0.1", port=0, tokens_per_chunk=1, step_delay=0.0, omit_usage=False,
                 model="fake", allow_reset=True, status_override=None, ssl_context=None):
        self.host, self.port = host, port
        self.ssl_context = ssl_context  # serve https (an ssl.SSLContext with the server's certificate)
        self.tokens_per_chunk = tokens_per_chunk
        self.step_delay = step_delay
        self.omit_usage = omit_usage
        self.model = model
        self.allow_reset = allow_reset
        self.status_override = status_override
        self.requests = []
        self.resets = 0
        self.generated = 0
        self._loop = None
        self._server = None
        self._thread = None

    # -- HTTP plumbing
    async def _handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _version = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            await self._route(method, path, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            with contextlib.suppress(Exception):  # the peer may be gone already
                writer.close()

    @staticmethod
    def _plain(writer, status, payload, ctype="application/json"):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        writer.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                     % (status, ctype.encode(), len(data)) + data)

    async def _route(self, method, path, body, writer):
        if path == "/health":
            self._plain(writer, 200, b"", "text/plain")
        elif path == "/v1/models":
            self._plain(writer, 200, {"object": "list", "data": [{"id": self.model, "object": "model",
                                                                  "max_model_len": 4096}]})
        elif path == "/metrics":
            text = ("# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{model_name=\"%s\"}"
                    " %d\n" % (self.model, self.generated))
            self._plain(writer, 200, text.encode(), "text/plain")
        elif path == "/reset_prefix_cache" and method == "POST":
            if self.allow_reset:
                self.resets += 1
                self._plain(writer, 200, b"", "text/plain")
            else:
                self._plain(writer, 404, {"detail": "Not Found"})
        elif path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            self.requests.append(body)
            if self.status_override:
                self._plain(writer, self.status_override, {"error": {"message": "overridden status"}})
            else:
                await self._stream(path, body, writer)
        else:
            self._plain(writer, 404, {"detail": "Not Found"})
        await writer.drain()

    async def _stream(self, path, body, writer):
        chat = path.endswith("chat/completions")
        total = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        per_chunk = int(body.get("x_tokens_per_chunk") or self.tokens_per_chunk)
        fail_after = body.get("x_fail_after")
        omit_usage = body.get("x_omit_usage", self.omit_usage)
        usage_wanted = bool((body.get("stream_options") or {}).get("include_usage")) and not omit_usage
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        kind = "chat.completion.chunk" if chat else "text_completion"
        prefix = '{"id":"x","object":"%s","created":0,"model":"%s","choices":[{"index":0,' % (kind, self.model)
        sent = events = 0
        while sent < total:
            n = min(per_chunk, total - sent)
            text = " tok" * n
            last = sent + n >= total
            finish = '"length"' if last else "null"
            if chat:
                event = prefix + '"delta":{"content":"%s"},"finish_reason":%s}]}' % (text, finish)
            else:
                event = prefix + '"text":"%s","logprobs":null,"finish_reason":%s}]}' % (text, finish)
            data = b"data: " + event.encode() + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            sent += n
            events += 1
            self.generated += n
            if fail_after is not None and events >= int(fail_after):
                await writer.drain()
                writer.transport.abort()  # a request failing mid-stream
                return
            await writer.drain()
            await asyncio.sleep(self.step_delay)
        if usage_wanted:
            usage = {"prompt_tokens": 7, "completion_tokens": sent, "total_tokens": sent + 7}
            data = b"data: " + json.dumps({"id": "x", "object": kind, "choices": [], "usage": usage}).encode() + \
                b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))

    # -- lifecycle
    async def _start(self):
        self._server = await asyncio.start_server(self._handle, self.host, self.port, backlog=512,
                                                  ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]

    def start_in_thread(self):
        ready = threading.Event()

        def main():
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self):
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.ssl_context else "http", self.host, self.port)


def serve_forever(port, **kwargs):
    source = FastTokenSource(port=port, **kwargs)

    async def main():
        await source._start()
        print("listening on %d" % source.port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


if __name__ == "__main__":
    serve_forever(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
