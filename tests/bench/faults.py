#!/usr/bin/env python3
"""faults.py -- ringproxy under a failing allocator (tests/faults/faultshim.c)
for SECS seconds at each rate (default 1% then 5%), with a reload every
second, a client requesting one URL after another and a burst of 40
connections at once with each reload; then, the shim off, how long until
20 requests in a row are served. Reports per rate: the requests and their
outcomes, the failed-request share, the reloads that could not allocate,
the health checks counted in health_local_errors, whether the proxy is
still running (and its signal if not), and the recovery time.

usage: faults.py BUILD [--secs 60] [--rates 0.01,0.05] [--seed 1]
                 [--no-spare] [--scrape]
  --no-spare  libcurl's own allocations fail too (libcurl 7.88 may die of
              SIGFPE in trhash, see tests/e2e/test_faults.py)
  --scrape    scrape /stats and /metrics during the faults too (libevent
              2.1.12's evhttp may die in evhttp_request_new or
              evhttp_connection_base_bufferevent_new)
Only 127.0.0.1; every process started is stopped by its PID."""

import argparse
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import harness as H  # noqa: E402


def shim_env(shim, ctl, seed):
    return {"LD_PRELOAD": shim, "FAULTSHIM_CTL": ctl, "FAULTSHIM_SEED": str(seed),
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}


def burst(px, path, n, statuses):
    """n clients at once, one request each; outcomes into statuses."""
    lock = threading.Lock()

    def one(k):
        try:
            st = px.get(f"{path}/{k}", timeout=10)[0]
        except (OSError, H.http.client.HTTPException):
            st = "error"
        with lock:
            statuses[st] = statuses.get(st, 0) + 1
    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--secs", type=float, default=60)
    ap.add_argument("--rates", default="0.01,0.05")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--no-spare", action="store_true")
    ap.add_argument("--scrape", action="store_true")
    a = ap.parse_args()
    rp = os.path.join(a.build, "src", "ringproxy")
    tc = os.path.join(a.build, "tests", "testcache", "testcache")
    shim = os.path.join(a.build, "tests", "faults", "faultshim.so")
    spare = "" if a.no_spare else "libcurl.so"
    for rate in (float(r) for r in a.rates.split(",")):
        ctl = H.write(f"benchctl.{time.monotonic_ns()}", "alloc_rate=0\n")
        caches = [H.Cache(tc, f"m{i}") for i in range(3)]
        px = H.Proxy(rp, H.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0"},
                                     health={"path": "/", "interval": "100ms", "fall": 2, "rise": 1},
                                     cache={"size": "8m"}),
                     "bench-faults", env=shim_env(shim, ctl, a.seed))
        admin = px.admin_port()
        px.wait_checked([c.name for c in caches])
        statuses, errors, reloads, i = {}, 0, 0, 0
        H.write(os.path.basename(ctl), f"alloc_rate={rate}\nspare={spare}\n")
        t0 = last = time.monotonic()
        while time.monotonic() - t0 < a.secs and px.alive():
            i += 1
            try:
                st = px.get(f"/f/{i % 500}", timeout=5)[0]
            except (OSError, H.http.client.HTTPException):
                st = "error"
            statuses[st] = statuses.get(st, 0) + 1
            if time.monotonic() - last >= 1 and px.alive():
                last = time.monotonic()
                px.signal(signal.SIGHUP)
                reloads += 1
                burst(px, f"/b/{i}", 40, statuses)
                if a.scrape:
                    for p in ("/stats", "/metrics"):
                        try:
                            H.get(admin, p, timeout=5)
                        except (OSError, H.http.client.HTTPException):
                            pass
        H.write(os.path.basename(ctl), "alloc_rate=0\n")
        t1 = time.monotonic()
        time.sleep(0.1)     # the shim reads its file every 50 ms
        alive = px.alive()
        took = None
        if alive:
            ok = H.wait_until(lambda: all(px.get(f"/again/{k}", timeout=2)[0] == 200 for k in range(20)), 10,
                              step=0.05)
            took = time.monotonic() - t1 if ok else None
        log = px.log()
        total = sum(statuses.values())
        failed = total - statuses.get(200, 0)
        local = None
        if alive:
            st = json.loads(H.get(admin, "/stats")[2])
            local = sum(b.get("health_local_errors", 0) for b in st["backends"])
        print(f"rate {rate:.0%}, {a.secs:.0f} s, seed {a.seed}, spare {spare or 'none'}, "
              f"scrapes {'on' if a.scrape else 'off'}:")
        print(f"  requests {total}: {statuses}; failed share {failed / total if total else 0:.4%}")
        refused = len(re.findall(r"out of memory while loading it", log))
        accepted = len(re.findall(r"info: reload \d+:", log))
        print(f"  reloads sent {reloads}; refused for want of memory {refused}; accepted {accepted}")
        print(f"  health_local_errors {local}; backends gone down "
              f"{len(re.findall(r'up -> down', log))}")
        if alive:
            print(f"  still running; 20 requests in a row served {took:.2f} s after the shim went off"
                  if took is not None else "  still running, but not serving 20 in a row within 10 s")
        else:
            rc = px.proc.returncode
            print(f"  DIED: {'signal ' + signal.Signals(-rc).name if rc and rc < 0 else 'exit ' + str(rc)}")
        px.stop()
        for c in caches:
            c.stop()
    H.stop_all()


main()
