"""The streaming client against the fast token source (a stand-in for vLLM's SSE stream)."""
import pathlib
import ssl
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "benchmarks"))

from fast_token_source import FastTokenSource  # noqa: E402

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_metrics as bm  # noqa: E402
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc  # noqa: E402


@pytest.fixture(scope="module")
def source():
    server = FastTokenSource().start_in_thread()
    yield server
    server.stop()


def body(**kw):
    base = {"model": "fake", "prompt": "x", "max_tokens": 10, "stream": True, "stream_options": {"include_usage": True}}
    base.update(kw)
    return base


def test_usage_counts_tokens_and_events_make_itl(source):
    outputs, duration = oc.run_streams(source.url + "/v1/completions", [body(max_tokens=12)])
    o = outputs[0]
    assert o.success and o.error == ""
    assert o.output_tokens == 12 and o.chunks == 12 and len(o.itl) == 11
    assert o.generated_text == " tok" * 12
    assert duration > 0 and o.latency >= o.ttft > 0


def test_multi_token_chunks(source):
    outputs, _duration = oc.run_streams(source.url + "/v1/chat/completions", [body(max_tokens=9, x_tokens_per_chunk=3)])
    o = outputs[0]
    assert o.success and o.output_tokens == 9 and o.chunks == 3 and len(o.itl) == 2


def test_failure_mid_stream_is_reported(source):
    outputs, _duration = oc.run_streams(source.url + "/v1/completions", [body(max_tokens=50, x_fail_after=4), body()],
                                        concurrency=2)
    assert not outputs[0].success and "before [DONE]" in outputs[0].error and outputs[0].chunks == 4
    assert outputs[1].success


def test_missing_usage(source):
    outputs, _duration = oc.run_streams(source.url + "/v1/completions", [body(max_tokens=6, x_omit_usage=True)])
    assert outputs[0].success and outputs[0].output_tokens is None
    assert bm.output_length(outputs[0]) == (6, False)


def test_http_error_keeps_the_response(source):
    source.status_override = 400
    try:
        outputs, _duration = oc.run_streams(source.url + "/v1/completions", [body()])
    finally:
        source.status_override = None
    assert not outputs[0].success and outputs[0].status == 400 and "overridden status" in outputs[0].error


@pytest.fixture(scope="module")
def tls_source(tmp_path_factory):
    """The token source behind TLS, as vllm_gateway serves it with a certificate: a self-signed one for
    127.0.0.1, made with openssl (the client must be given it as ca_path, or told not to check)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "2",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server = FastTokenSource(ssl_context=context).start_in_thread()
    server.ca_path = str(cert)
    yield server
    server.stop()


def test_https_streams_and_requests_check_the_certificate(tls_source):
    """An https:// URL is spoken over TLS, with the certificate checked against ca_path."""
    assert tls_source.url.startswith("https://")
    tls = {"validate_certs": True, "ca_path": tls_source.ca_path}
    outputs, _duration = oc.run_streams(tls_source.url + "/v1/completions", [body(max_tokens=40)] * 3, tls=tls)
    assert [o.success for o in outputs] == [True] * 3 and [o.output_tokens for o in outputs] == [40] * 3, outputs[0].error
    assert all(o.generated_text == " tok" * 40 for o in outputs)
    models = oc.request_json(tls_source.url + "/v1/models", tls=tls)
    assert models.ok and models.body["data"][0]["id"] == "fake"


def test_https_refuses_a_certificate_it_cannot_check(tls_source):
    """Without the CA, a self-signed certificate fails every stream and request, naming TLS; validate_certs false
    accepts it (as ansible.builtin.uri's option of the same name does)."""
    outputs, _duration = oc.run_streams(tls_source.url + "/v1/completions", [body()])
    assert not outputs[0].success and "tls:" in outputs[0].error and "CERTIFICATE_VERIFY_FAILED" in outputs[0].error
    refused = oc.request_json(tls_source.url + "/v1/models")
    assert refused.status is None and "CERTIFICATE_VERIFY_FAILED" in refused.error, refused.error
    unchecked = {"validate_certs": False, "ca_path": None}
    outputs, _duration = oc.run_streams(tls_source.url + "/v1/completions", [body(max_tokens=5)], tls=unchecked)
    assert outputs[0].success and outputs[0].output_tokens == 5
    assert oc.request_json(tls_source.url + "/health", tls=unchecked).ok


def test_refused_connection():
    outputs, _duration = oc.run_streams("http://127.0.0.1:1/v1/completions", [body()])
    assert not outputs[0].success and outputs[0].error
    resp = oc.request_json("http://127.0.0.1:1/health", timeout=2)
    assert resp.status is None and resp.refused


def test_streams_skip_an_address_that_refuses(source, monkeypatch):
    """A name whose first address refuses (localhost as ::1 before 127.0.0.1, vLLM bound to 0.0.0.0): the
    streams go to the address that accepts, as socket.create_connection would. 127.0.0.2 stands in for ::1
    here: loopback, and nothing listens on it at the source's port."""
    port = int(source.url.rsplit(":", 1)[1])
    real = oc.socket.getaddrinfo

    def both(host, *args, **kwargs):
        if host != "two-addresses.test":
            return real(host, *args, **kwargs)
        return [entry for ip in ("127.0.0.2", "127.0.0.1") for entry in real(ip, *args, **kwargs)]

    monkeypatch.setattr(oc.socket, "getaddrinfo", both)
    outputs, _duration = oc.run_streams("http://two-addresses.test:%d/v1/completions" % port, [body(), body()])
    assert [o.success for o in outputs] == [True, True], [o.error for o in outputs]
    # Without the skip, every stream is refused: the first address really does refuse.
    monkeypatch.setattr(oc, "_reachable_address", lambda host, port: real("127.0.0.2", port, 0, oc.socket.SOCK_STREAM)[0])
    refused, _duration = oc.run_streams("http://two-addresses.test:%d/v1/completions" % port, [body()])
    assert not refused[0].success and refused[0].error


def test_concurrency_limit_and_order(source):
    payloads = [body(max_tokens=n) for n in (3, 5, 7, 9, 11)]
    outputs, _duration = oc.run_streams(source.url + "/v1/completions", payloads, concurrency=2)
    assert [o.output_tokens for o in outputs] == [3, 5, 7, 9, 11]


def test_accumulator_handles_split_events_and_crlf():
    o = oc.StreamOutput(0)
    acc = oc.SSEAccumulator(o, start=0.0)
    acc.feed(b'data: {"choices":[{"text":"a"}]}\r\n\r\ndata: {"choi', 1.0)
    acc.feed(b'ces":[{"text":"b"}]}\n\n: ping\n\ndata: {"choices":[],"usage":{"completion_tokens":2}}\n\n', 1.5)
    acc.feed(b"data: [DONE]\n\n", 1.6)
    acc.finish(clean=True)
    assert o.success and o.generated_text == "ab" and o.output_tokens == 2
    assert o.ttft == 1.0 and o.itl == [0.5] and o.latency == 1.5


def test_accumulator_error_event():
    o = oc.StreamOutput(0)
    acc = oc.SSEAccumulator(o, start=0.0)
    acc.feed(b'data: {"choices":[{"text":"a"}]}\n\ndata: {"error":{"message":"engine dead"}}\n\n', 1.0)
    acc.finish(clean=True)
    assert not o.success and o.error == "engine dead"
