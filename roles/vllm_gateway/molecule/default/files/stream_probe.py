"""Seconds until the first server-sent event and until the end of a streamed chat request through the gateway.

Usage: stream_probe.py URL [CAFILE]. Prints JSON {"status", "first_event_s", "total_s", "events"}.
"""
import json
import ssl
import sys
import time
import urllib.request

url = sys.argv[1]
context = ssl.create_default_context(cafile=sys.argv[2]) if len(sys.argv) > 2 else None
request = urllib.request.Request(url, data=json.dumps({"model": "tiny", "stream": True, "messages": []}).encode(),
                                 headers={"Content-Type": "application/json"})
started = time.monotonic()
first, events = None, []
with urllib.request.urlopen(request, timeout=30, context=context) as response:  # noqa: S310 - the gateway under test
    status = response.status
    for line in response:
        if line.startswith(b"data: "):
            events.append(line[6:].strip().decode())
            if first is None:
                first = time.monotonic() - started
print(json.dumps({"status": status, "first_event_s": first, "total_s": time.monotonic() - started, "events": events}))
