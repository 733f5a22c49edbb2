#!/usr/bin/env python3
"""test_pipeline.py -- a connection's requests are served by one loop, not
by a call chain that grows with each pipelined request: 100,000 requests
pipelined in one burst while the only backend is down (every one answered
at once by the proxy itself) reach 100,000 replies in order from a proxy
whose stacks are limited to 256 KiB, which lives on; meanwhile another
connection on the same worker is still answered promptly.
usage: test_pipeline.py RINGPROXY TESTCACHE"""

import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

N = 100000
HEAD_EVERY = 7          # every 7th request is a HEAD: its reply has no body
DEADLINE = 150          # seconds for the whole burst (ASan build, 2 cores)
HEAD_END = re.compile(rb"\r\n\r\n")
CL = re.compile(rb"\r\nContent-Length: (\d+)\r\n")
RID = re.compile(rb"\(request ([0-9a-f]{20})\)\n$")


# The prober: one GET on a new connection every 20 ms until stopped; prints
# "status,monotonic start,latency" a line.
PROBER = r"""
import signal, socket, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
port = int(sys.argv[1])
try:
    while True:
        t0 = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /probe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            d = s.recv(4096)
            s.close()
            st = int(d.split()[1]) if d else 0
        except OSError:
            st = 0
        print(f"{st},{t0},{time.monotonic() - t0}", flush=True)
        time.sleep(0.02)
except SystemExit:
    pass
"""


def read_replies(s, n, methods, deadline):
    """Read n replies from s, in order: (count read, [problems], [request
    ids of the GETs in order]). Parsed by offset, not by slicing a buffer
    per line: 100,000 replies are about 20 MB."""
    buf = bytearray()
    pos = 0
    got = 0
    bad = []
    rids = []
    while got < n and time.monotonic() < deadline:
        while got < n:
            m = HEAD_END.search(buf, pos)
            if not m:
                break
            head = bytes(buf[pos:m.end()])
            clm = CL.search(head)
            blen = int(clm.group(1)) if clm else 0
            is_head = methods[got] == "HEAD"
            end = m.end() + (0 if is_head else blen)
            if end > len(buf):
                break
            if not head.startswith(b"HTTP/1.1 503 "):
                bad.append((got, head[:60]))
            if not is_head:
                r = RID.search(bytes(buf[m.end():end]))
                rids.append(r.group(1).decode() if r else None)
            pos = end
            got += 1
        if pos > 1 << 20:          # drop what was read, now and then
            del buf[:pos]
            pos = 0
        if got >= n:
            break
        try:
            d = s.recv(1 << 20)
        except OSError:         # a timeout, or the proxy gone
            break
        if not d:
            break
        buf += d
    return got, bad, rids


def main():
    # a backend that refuses connections, marked down by active checks:
    # the walk finds no backend and the proxy answers 503 at once
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    conf = harness.conf_text([("dead", port)],
                             proxy={"workers": 1, "buffer_size": "1m"},
                             health={"path": "/", "interval": "100ms", "timeout": "100ms", "fall": 1})
    p = harness.Proxy(RP, conf, "pipeline", stack=256 * 1024)
    t.check(p.wait_log(r"backend dead: (up|checking) -> down", timeout=20), "the only backend is marked down")

    methods = ["HEAD" if i % HEAD_EVERY == HEAD_EVERY - 1 else "GET" for i in range(N)]
    burst = b"".join(f"{m} /p/{i} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for i, m in enumerate(methods))
    s = p.sock(timeout=30)
    deadline = time.monotonic() + DEADLINE

    # another client on the same worker, asking now and then while the
    # burst is served: a deep pipeline must not keep the worker from it.
    # A process of its own, so that this one's parsing cannot delay it.
    probe = subprocess.Popen([sys.executable, "-c", PROBER, str(p.port)], stdout=subprocess.PIPE,
                             text=True)
    harness._procs.append(probe)
    time.sleep(0.3)

    wt = harness.Sender(s, burst)
    t0 = time.monotonic()
    wt.start()
    got, bad, rids = read_replies(s, N, methods, deadline)
    t1 = time.monotonic()
    dt = t1 - t0
    wt.join(10)
    s.close()
    harness.stop_pid(probe)
    probe_times = []
    for line in probe.stdout.read().split():
        st, at, lat = line.split(",")
        if t0 <= float(at) <= t1:
            probe_times.append((int(st), float(lat)))
    t.note(f"{got} replies in {dt:.1f}s; {len(probe_times)} probes on another connection meanwhile, "
           f"slowest {max((x[1] for x in probe_times), default=0) * 1000:.0f} ms")
    t.check(wt.sent == len(burst), f"the client sent all {N} requests in one burst ({len(burst)} bytes)")
    t.check(got == N and not bad, f"{N} pipelined requests, backend down: {got} replies, each a 503",
            bad[:5])
    seq = [int(r[10:], 16) if r else -1 for r in rids]
    in_order = all(0 <= a < b for a, b in zip(seq, seq[1:])) and len(rids) == N - N // HEAD_EVERY
    t.check(in_order, "... in order: every HEAD's reply without a body where its request was, and the "
            "GETs' request ids increasing", [r for r in rids[:3]])
    t.check(p.alive(), "the proxy is alive with 256 KiB stacks")
    st, h, body = p.get("/after")
    t.check(st == 503 and harness.request_id(body), "... and answers the next connection", [st, body])
    # TSan makes the burst's own work several times slower, and with it
    # the turn the other connection waits for
    window = 0.25 * harness.time_scale(RP)
    slow = [x for x in probe_times if x[0] != 503 or x[1] > window]
    t.check(probe_times and not slow, f"another connection on the same worker is answered within "
            f"{window * 1000:.0f} ms while the burst is served ({len(probe_times)} probes)", slow[:5])
    t.check(p.stop() == 0, "SIGTERM: exit 0")


harness.run_main(t, main)
