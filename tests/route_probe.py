"""The route probe, shared by the single-node gateway test (tests/integration/test_gateway_routes.py) and the
replicas behind the gateway (tests/cluster): which of the routes a running vLLM mounts answer a request without the
API key. The routes come from the server's own /openapi.json, plus the mounts FastAPI leaves out of the schema.
"""
import http.client
import json
import re
import urllib.parse

# Mounted sub-applications and FastAPI's own pages: served, but outside the schema /openapi.json describes.
OUTSIDE_THE_SCHEMA = [("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc")]
# One body for every POST: a chat request (what /invocations runs), with what /tokenize and /detokenize read too.
PROBE_BODY = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}], "prompt": "Say hi",
              "tokens": [1, 2], "max_tokens": 2}


def request(base, method, path, key=None, body=None, timeout=120):
    """(status, body text) of one request; `base` is http://host:port."""
    url = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(body).encode() if body is not None else None
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def mounted_routes(base):
    """Every (method, path) the running server documents in its /openapi.json, plus what it serves outside it."""
    status, text = request(base, "GET", "/openapi.json")
    assert status == 200, "GET /openapi.json on vLLM answered %d: %s" % (status, text[:500])
    routes = [(method.upper(), path) for path, item in json.loads(text)["paths"].items() for method in item
              if method.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE")]
    return sorted(set(routes + OUTSIDE_THE_SCHEMA), key=lambda r: (r[1], r[0]))


def probe(base, routes, model=None):
    """Each route requested without the key: {(method, path): status}. ``model``: the served name the bodies ask for
    (PROBE_BODY's, the integration tier's tiny Llama, when omitted)."""
    found = {}
    payload = dict(PROBE_BODY, model=model) if model else PROBE_BODY
    for method, path in routes:
        concrete = re.sub(r"\{[^}]+\}", "probe", path)
        body = payload if method in ("POST", "PUT", "PATCH") else None
        found[(method, path)] = request(base, method, concrete, body=body)[0]
    return found
