#!/usr/bin/env python3
"""discovery.py -- what a DNS SRV poll ([discovery] srv) costs ringproxy's
main thread at N targets. unbound on 127.0.0.1 serves N SRV records (over
TCP: the answer is far over 512 bytes) and N A records, TTL 0; ringproxy
polls every 100 ms with no change (the steady state: one SRV query and N
address queries a poll, all on the main loop) for SECONDS; the main
thread's CPU time (/proc/PID/task/PID/schedstat) over the window, less
that of the same proxy with the same N backends from its file and no
discovery (its once-a-second sampling), divided by the polls made. One
test cache stands for every pod (no traffic is sent). Every process is
stopped by its PID.
usage: discovery.py RINGPROXY TESTCACHE [N [SECONDS]]"""

import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import dns  # noqa: E402
import harness as H  # noqa: E402

RP, TC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 10
SRV = "_http._tcp.cache.ns.svc.cluster.local."


def main_cpu_ns(pid):
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=30) as r:
        return json.loads(r.read())


def window(px, admin):
    """Main-thread CPU ns and polls over SECONDS."""
    s0, c0 = stats(admin), main_cpu_ns(px.pid)
    time.sleep(SECONDS)
    c1, s1 = main_cpu_ns(px.pid), stats(admin)
    polls = lambda s: (s["discovery"] or {}).get("poll", {}).get("rounds", 0)  # noqa: E731
    return c1 - c0, polls(s1) - polls(s0), s1


def main():
    cache = H.Cache(TC, "pod")
    names = [f"pod-{i:04d}" for i in range(N)]
    recs = [f"{n}.cache.ns.svc.cluster.local. 0 IN A 127.0.0.1" for n in names]
    recs += [f"{SRV} 0 IN SRV 0 10 {cache.port} {n}.cache.ns.svc.cluster.local." for n in names]
    u = dns.Unbound(recs)
    head = "[proxy]\nlisten = 127.0.0.1:0\nadmin_listen = 127.0.0.1:0\nworkers = 1\n[cache]\nsize = 0\n"
    static = head + "".join(f"[backend {n}]\nurl = http://127.0.0.1:{cache.port}\n" for n in names)
    disc = head + (f"[discovery]\nsrv = {SRV}\nresolver = 127.0.0.1:{u.port}\ninterval = 100ms\n"
                   "apply_every = 0\n")
    base = H.Proxy(RP, static, "bench-static")
    base_ns, _, _ = window(base, base.admin_port())
    base.stop()
    t0 = time.monotonic()
    px = H.Proxy(RP, disc, "bench-discovery")
    started = time.monotonic() - t0
    admin = px.admin_port()
    H.wait_until(lambda: len(stats(admin)["backends"]) == N, 30)
    ns, polls, s = window(px, admin)
    poll = s["discovery"]["poll"]
    per = (ns - base_ns) / max(polls, 1)
    print(f"targets {N}, on the ring {len(s['backends'])}, answer over TCP: {poll['tcp']}")
    print(f"start (first answer taken whole, {N} backends): {started:.2f} s")
    print(f"{polls} polls in {SECONDS:.0f} s; main thread {ns / 1e6:.1f} ms CPU, {base_ns / 1e6:.1f} ms without discovery")
    print(f"a poll: {per / 1e6:.2f} ms of the main thread's CPU ({per / N / 1e3:.2f} us a target); "
          f"its time from first query to last answer {poll['last_round_us'] / 1e3:.1f} ms")
    px.stop()
    u.stop()
    cache.stop()


try:
    main()
finally:
    H.stop_all()
