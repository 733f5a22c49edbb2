#!/usr/bin/env python3
"""test_why_down.py -- why a backend is in its state, as /stats, /metrics
and the page say it: for each kind of failure (a refused connection, a
response timeout and 5xx responses seen by passive health; a failing
status, a refused connection and a timeout seen by active checks) the
backend's reason names it, with since when, the last check's result and
duration and the failures in a row; /metrics has ringproxy_backend_up and
ringproxy_backend_state_since_seconds; the page's title and a tile say
"N of M up".
usage: test_why_down.py RINGPROXY TESTCACHE"""

import json
import os
import re
import socket
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()




def fetch(port, path):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def backends(port):
    return {b["name"]: b for b in json.loads(fetch(port, "/stats"))["backends"]}


def keys_of(names, name, n=4, prefix="/k/"):
    """n keys whose owner is name on the ring of names (bounded loads off)."""
    return ringref.Ring([(x, 1.0) for x in names], 160).keys_of(name, n, prefix)


def wait_state(port, name, pred, timeout=5):
    got = {}

    def ok():
        got.update(backends(port)[name])
        return pred(got)
    H.wait_until(ok, timeout)
    return got


def black_hole():
    """A listening socket that never accepts: connections are made (the
    kernel's backlog) and never answered."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


def passive():
    """Passive health, fall 1: each kind of failed request, in the
    reason."""
    caches = [H.Cache(TC, f"p{i}") for i in range(4)]
    names = [c.name for c in caches]
    p = H.Proxy(RP, H.conf_text(caches, ring={"balance_factor": 0},
                                proxy={"admin_listen": "127.0.0.1:0", "response_timeout": "300ms",
                                       "retries": 0},
                                health={"fall": 1, "backoff": "60s", "passive_5xx": "on"}))
    port = p.admin_port()
    b = backends(port)
    t.check(all(x["up"] and x["reason"] == "" and x["check"] is None and x["state_since_seconds"] < 30
                for x in b.values()),
            "at the start: all up, no reason yet, no check ran, since the start", str(b))
    t.check(re.search(r'(?m)^ringproxy_backend_up\{backend="p0"\} 1$', fetch(port, "/metrics")),
            "/metrics: ringproxy_backend_up 1")

    before = time.time()
    caches[0].stop()
    for k in keys_of(names, "p0", 1):
        H.get(p.port, k)
    x = wait_state(port, "p0", lambda x: not x["up"])
    t.check(not x["up"] and x["reason"] == "failed requests: connect: Connection refused x1",
            "a refused connection: down, the reason says so", str(x))
    t.check(before - 1 <= x["since"] <= time.time() + 1 and x["last_failure"] == "connect: Connection refused",
            "since when (Unix time of the fall) and the last failure's cause", str(x))

    caches[1].admin("/__set?delay=2000")
    for k in keys_of(names, "p1", 1, "/t/"):
        H.get(p.port, k)
    x = wait_state(port, "p1", lambda x: not x["up"])
    t.check(x["reason"] == "failed requests: no response within 300ms x1",
            "a response timeout: down, the reason says so", str(x))

    caches[2].admin("/__set?status=503")
    for k in keys_of(names, "p2", 1, "/s/"):
        H.get(p.port, k)
    x = wait_state(port, "p2", lambda x: not x["up"])
    t.check(x["reason"] == "failed requests: 5xx responses x1", "5xx responses: down, the reason says so", str(x))

    time.sleep(1.1)
    m = fetch(port, "/metrics")
    since = re.search(r'(?m)^ringproxy_backend_state_since_seconds\{backend="p0"\} (\d+)$', m)
    t.check(since and 1 <= int(since.group(1)) < 60, "/metrics: ringproxy_backend_state_since_seconds of p0 counts "
            "from its fall", since.group(0) if since else m[-2000:])
    t.check(re.search(r'(?m)^ringproxy_backend_up\{backend="p0"\} 0$', m) and
            re.search(r'(?m)^ringproxy_backend_up\{backend="p3"\} 1$', m), "/metrics: ringproxy_backend_up 0 and 1")
    page = fetch(port, "/")
    title = re.search(r"<title>([^<]*)</title>", page)
    tile = re.search(r'<div class="tile amber" id="t-up"><span>[^<]*</span><b>([^<]*)</b>', page)
    t.check(title and title.group(1) == "ringproxy: 1 of 4 up" and tile and tile.group(1) == "1 of 4",
            "the page's title and tile: 1 of 4 up", (title.group(0) if title else "") + (tile.group(0) if tile else ""))
    row = re.search(r'<tr class="backend" data-backend="p0".*?</tr>', page, re.S)
    t.check(row and "connect: Connection refused x1" in row.group(0) and re.search(r"down for \d+ s", row.group(0)),
            "p0's row: down for how long, and why", row.group(0)[:1500] if row else page[-2000:])
    p.stop()


def active():
    """Active checks, fall 2: a failing status, a refused connection and a
    check that gets no answer, each in the reason with the last check."""
    caches = [H.Cache(TC, f"a{i}") for i in range(3)]
    hole = black_hole()
    backs = caches + [("a3", hole.getsockname()[1])]
    p = H.Proxy(RP, H.conf_text(backs, proxy={"admin_listen": "127.0.0.1:0"},
                                health={"path": "/__health", "interval": "200ms", "timeout": "300ms",
                                        "rise": 2, "fall": 2}))
    port = p.admin_port()
    x = wait_state(port, "a0", lambda x: x["check"] is not None)
    t.check(x["check"] and x["check"]["passed"] and x["check"]["status"] == 200 and
            x["check"]["result"] == "status 200" and 0 < x["check"]["seconds"] < 1 and
            abs(x["check"]["time"] - time.time()) < 5,
            "the last check: passed, status 200, its duration and time", str(x))
    m = fetch(port, "/metrics")
    t.check(re.search(r'(?m)^ringproxy_backend_last_check_duration_seconds\{backend="a0"\} 0\.\d+$', m) and
            re.search(r'(?m)^ringproxy_backend_last_check_status\{backend="a0"\} 200$', m),
            "/metrics: the last check's duration and status")

    caches[0].admin("/__set?health=503")
    x = wait_state(port, "a0", lambda x: not x["up"])
    t.check(x["reason"] == "health check: status 503, expected 200-399 x2" and not x["check"]["passed"] and
            x["check"]["status"] == 503 and x["check_fails"] >= 2,
            "a failing status: down with check status 503, failed checks in a row", str(x))

    caches[1].stop()
    x = wait_state(port, "a1", lambda x: not x["up"])
    t.check(x["reason"] == "health check: connect: Connection refused x2" and x["check"]["status"] == 0,
            "a refused check: down, the reason says so", str(x))

    # a3 never answered: new at start, it was checking and is down after
    # its first check
    x = wait_state(port, "a3", lambda x: x["state"] == "down")
    t.check(x["reason"] == "first health check: timeout: no answer within 300ms" and
            0.25 <= x["check"]["seconds"] < 2,
            "a check with no answer: down on a timeout, the check's duration about the timeout", str(x))

    caches[0].admin("/__set?health=200")
    x = wait_state(port, "a0", lambda x: x["up"])
    t.check(x["up"] and x["reason"] == "health check passed x2" and x["check_fails"] == 0,
            "back up: the reason says why", str(x))
    page = fetch(port, "/")
    row = re.search(r'<tr class="backend" data-backend="a3".*?</tr>', page, re.S)
    t.check(row and "last check failed: timeout: no answer within 300ms" in row.group(0),
            "the page shows the last check", row.group(0)[:1500] if row else "")
    p.stop()
    hole.close()


def main():
    passive()
    active()


H.run_main(t, main)
