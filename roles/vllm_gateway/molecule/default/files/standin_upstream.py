"""STAND-IN for vLLM behind the gateway (Molecule only): answers every request with what it received.

Usage: standin_upstream.py PORT LOG. Every request appends "METHOD PATH" to LOG and gets JSON back with the
method, the path as it arrived and the Authorization header. POST /v1/chat/completions with "stream": true answers
server-sent events: one event at once, the next three seconds later, so that a buffering proxy shows.
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LOG = int(sys.argv[1]), sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with open(LOG, "a") as log:
            log.write("%s %s\n" % (self.command, self.path))
        seen = {"method": self.command, "path": self.path, "authorization": self.headers.get("Authorization"),
                "body_bytes": len(body)}
        try:
            stream = json.loads(body or b"{}").get("stream") is True
        except ValueError:
            stream = False
        if stream:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in (json.dumps(seen), "[DONE]"):
                self.wfile.write(("data: %s\n\n" % event).encode())
                self.wfile.flush()
                if event != "[DONE]":
                    time.sleep(3)
            return
        data = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = answer

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
