"""livestats.py -- a real ringproxy whose admin listener has something in
every part of its reading, for the tests that check documents against
what the proxy emits (test_stats_page.py, test_dashboard.py): two test
caches under active checks, the hot-object cache on, a few requests (a
miss, a hit, a 404) and a reload with a warm ramp. Loopback only, ports
from the kernel; the harness stops everything by PID.
Standard library only."""

import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import harness  # noqa: E402


def get(port, path):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def start(rp, tc):
    """The proxy (harness.Proxy) and its admin port, after the traffic
    and the reload."""
    caches = [harness.Cache(tc, n) for n in ("cache-1", "cache-2", "cache-3")]
    conf = lambda cs, ramp: harness.conf_text(  # noqa: E731
        cs, proxy={"admin_listen": "127.0.0.1:0"}, ring={"ramp": ramp},
        health={"path": "/__health", "interval": "200ms"}, cache={"size": "1m", "min_uses": 1})
    path = harness.write("livestats.ini", conf(caches[:2], "0"))
    proxy = harness.Proxy(rp, path=path)
    port = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    for target in ("/t/1.jpg", "/t/1.jpg", "/t/2.jpg", "/t/3.jpg?status=404"):
        proxy.get(target)
    harness.write("livestats.ini", conf(caches, "1h"))
    proxy.reload()
    harness.wait_until(lambda: all(b["check"] for b in json.loads(get(port, "/stats"))["backends"]), 10)
    return proxy, port


def read(port):
    """/stats parsed, and /metrics as text."""
    return json.loads(get(port, "/stats")), get(port, "/metrics")
