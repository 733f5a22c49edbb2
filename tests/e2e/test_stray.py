#!/usr/bin/env python3
"""test_stray.py -- a backend that sends a second response nobody asked
for, some time after each real one (a broken cache, a buggy origin behind
it). HTTP/1.1 cannot tell such a response from the answer to a request
sent meanwhile on the same kept-alive connection, so the first one that
comes that way reaches the wrong client; but once ringproxy has seen
stray bytes (on an idle connection, or past the end of a response) it
closes that connection and keeps none alive to the backend for 60 s:
every later request gets its own body. Before, each reused connection
handed the next request the stray answer to the previous one.
usage: test_stray.py RINGPROXY TESTCACHE"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()

GAP = 0.2       # between a client's requests
STRAY = 0.3     # from a real response to the stray one: after the next request


def handler(fake, s, n):
    """Each request's own body, then STRAY s later a response nobody asked
    for (the request is read after it: it was sent meanwhile)."""
    rest = b""
    while True:
        head, rest = fake.read_head(s, rest)
        if not head:
            return
        target = head.split(b" ")[1]
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(target), target))
        time.sleep(STRAY)
        junk = b"stray after " + target
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(junk), junk))


def main():
    fake = H.Fake(handler)
    proxy = H.Proxy(RP, H.conf_text([("odd", fake.port)], proxy={"workers": 1, "retries": 0,
                                                                   "admin_listen": "127.0.0.1:0"},
                                    health={"passive": "off"}), tag="stray")
    A = proxy.admin_port()
    conn = proxy.http()
    got = []
    for i in range(10):
        path = f"/s/{i}"
        conn.request("GET", path)
        r = conn.getresponse()
        got.append((path, r.read().decode()))
        time.sleep(GAP)
    wrong = [(p, b) for p, b in got if b != p]
    t.check(len(wrong) <= 1,
            "10 requests, GAP apart, to a backend that sends a stray response after each: "
            "at most the first that comes before it is seen reaches a client", wrong)
    st, _, body = H.get(A, "/stats")
    b = next((x for x in json.loads(body).get("backends", []) if x["name"] == "odd"), {}) if st == 200 else {}
    t.check(b.get("stray_bytes", 0) >= 1, "/stats counts the stray bytes (stray_bytes)", b)
    t.check(proxy.wait_log(r"warn: backend odd: bytes no request asked for (after a response|on an idle "
                           r"connection): connection closed, and none kept alive to it for 60s"),
            "the log says so, naming the backend")
    t.check(fake.conns >= 8, "the requests after it each had a connection of their own", fake.conns)
    proxy.stop()
    fake.stop()


H.run_main(t, main)
