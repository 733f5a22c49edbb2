#!/usr/bin/env python3
"""test_faults.py -- faults of the proxy's own host, against test caches:

  - descriptors run out (nofile 256, 400 idle clients) while an admin
    scrape waits: the main thread does not spin (under 5% of a core, from
    /proc/PID/task/PID/stat), the log stays under 10 lines a second (the
    admin listener pauses its accept as the workers do; libevent's own
    messages go through the proxy's log, rate limited), and the scrape is
    answered once descriptors are free;
  - allocations fail at random (tests/faults/faultshim.c, 1% then 5%,
    seeded) while clients request and SIGHUP reloads come every 0.3 s:
    the proxy does not crash, a reload that could not allocate keeps the
    old config and says so, every answer is a 200 or the proxy's own
    503, and a health check that failed for want of memory is counted in
    health_local_errors without taking a backend down; with the faults
    off it serves every request again within 2 s, and /stats answers.
    (The admin listener is scraped only between the fault phases:
    libevent 2.1.12's evhttp crashes on its own failed allocations, in
    evhttp_request_new and evhttp_connection_base_bufferevent_new; and
    libcurl's own allocations are spared, see SPARE.)
  - the wall clock jumps back an hour (the shim's wall_offset): an
    object with max-age=2 stops being fresh 2 s after it was stored,
    uptime_seconds does not wrap, and a drain's progress goes on.
usage: test_faults.py RINGPROXY TESTCACHE FAULTSHIM"""

import json
import os
import re
import resource
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
SHIM = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
t = H.Tap()
TICK = os.sysconf("SC_CLK_TCK")
# libcurl 7.88's own allocations never fail here: on one failed in
# singlesocket() it leaves a socket's transfer hash destroyed but in use,
# and the next curl_multi_socket_action divides by its zero slots (SIGFPE
# in trhash; tests/bench/faults.py runs without this and counts it)
SPARE = "libcurl.so"



def main_thread_ticks(pid):
    """User + system ticks of the process's main thread (its tid is its pid)."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        col = f.read().rsplit(") ", 1)[1].split()
    return int(col[11]) + int(col[12])


def shim_env(ctl, seed=1):
    """The environment that loads the fault shim, its control file ctl.
    ASan's link order check is off: the shim comes first on purpose."""
    return {"LD_PRELOAD": SHIM, "FAULTSHIM_CTL": ctl, "FAULTSHIM_SEED": str(seed),
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}


def set_faults(ctl, **kw):
    """Rewrite the shim's control file (it reads it within 50 ms)."""
    H.write(os.path.basename(ctl), "".join(f"{k}={v}\n" for k, v in kw.items()))


def stats(port):
    st, _, body = H.get(port, "/stats", timeout=10)
    return json.loads(body) if st == 200 else None


def test_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        t.skip("out of descriptors", f"this test needs 1024 fds, the hard limit is {hard}")
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1024), hard))
    cache = H.Cache(TC, "fd1")
    px = H.Proxy(RP, H.conf_text([cache], proxy={"workers": 1, "admin_listen": "127.0.0.1:0"}), "faults-fd",
                 nofile=256)
    ap = px.admin_port()
    clients = []
    try:
        for _ in range(400):
            clients.append(socket.create_connection(("127.0.0.1", px.port), timeout=10))
        t.check(px.wait_log(r"worker 0: accept: Too many open files", 20),
                "400 idle clients: the proxy is out of descriptors")
        # the admin scrape waits in the listener's queue
        mark = px.log_size()
        scrape = socket.create_connection(("127.0.0.1", ap), timeout=30)
        scrape.sendall(b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % ap)
        t.check(px.wait_log(r"warn: admin listener: accept: Too many open files", 10, since=mark),
                "... the admin listener's accept fails, said in the proxy's own format", px.log()[-1500:])
        lines0, c0, t0 = px.log().count("\n"), main_thread_ticks(px.pid), time.monotonic()
        time.sleep(2)
        spent = (main_thread_ticks(px.pid) - c0) / TICK / (time.monotonic() - t0)
        rate = (px.log().count("\n") - lines0) / (time.monotonic() - t0)
        t.check(spent < 0.05, f"out of fds with an admin scrape waiting, the main thread uses {spent:.1%} "
                "of a core (under 5%)")
        t.check(rate < 10, f"... and the log grows {rate:.1f} lines a second (under 10)", px.log()[-1500:])
        own = re.findall(r"^\[(?:warn|err|msg|debug)\] .*$", px.log(), re.M)
        t.check(not own, "... and no line in libevent's own format (no time stamp): its messages come through "
                "the proxy's log", own[:3])
    finally:
        for s in clients:
            s.close()
    got = b""
    try:
        while True:
            b = scrape.recv(65536)
            if not b:
                break
            got += b
    except OSError as e:
        got += repr(e).encode()
    scrape.close()
    t.check(got.startswith(b"HTTP/1.1 200"), "once descriptors are free the waiting scrape is answered", got[:200])
    t.check(H.wait_until(lambda: px.get("/fd/after")[0] == 200, 10, step=0.2), "... and the proxy serves")
    t.check(px.stop() == 0, "... and exits 0 on SIGTERM")
    cache.stop()


def burst(px, path, n, statuses):
    """n clients at once, each one request; their statuses added to
    statuses (a connection closed unanswered counts as "closed")."""
    lock = threading.Lock()

    def one(k):
        try:
            st = px.get(f"{path}/{k}", timeout=10)[0]
        except (OSError, H.http.client.HTTPException):
            st = "closed"
        with lock:
            statuses[st] = statuses.get(st, 0) + 1
    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)


def run_phase(px, ctl, rate, seconds):
    """Requests and reloads for seconds with allocations failing at rate:
    (statuses {status: count}, connection errors, reloads sent)."""
    statuses, errors, reloads, i = {}, 0, 0, 0
    set_faults(ctl, alloc_rate=rate, spare=SPARE)
    t0 = last = time.monotonic()
    while time.monotonic() - t0 < seconds and px.alive():
        i += 1
        try:
            st = px.get(f"/f/{rate}/{i % 200}", timeout=5)[0]
            statuses[st] = statuses.get(st, 0) + 1
        except (OSError, H.http.client.HTTPException):
            errors += 1
        if time.monotonic() - last > 0.3 and px.alive():
            last = time.monotonic()
            px.signal(signal.SIGHUP)
            reloads += 1
            # a burst of connections at once: client and backend
            # connections the workers' free lists do not hold yet
            burst(px, f"/b/{rate}/{i}", 40, statuses)
    set_faults(ctl, alloc_rate=0)
    time.sleep(0.1)     # the shim reads its file every 50 ms
    return statuses, errors, reloads


def test_alloc():
    ctl = H.write(f"faultctl.{time.monotonic_ns()}", "alloc_rate=0\n")
    caches = [H.Cache(TC, f"m{i}") for i in range(3)]
    px = H.Proxy(RP, H.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0"},
                                 health={"path": "/", "interval": "100ms", "fall": 2, "rise": 1},
                                 cache={"size": "8m"}),
                 "faults-alloc", env=shim_env(ctl))
    ap = px.admin_port()
    t.check(px.wait_checked([c.name for c in caches]), "three caches checked up before the faults")
    before = stats(ap)
    for rate, secs in ((0.01, 10), (0.05, 10)):
        mark = px.log_size()
        statuses, errors, reloads = run_phase(px, ctl, rate, secs)
        total = sum(statuses.values()) + errors
        t.check(px.alive(), f"allocations failing at {rate:.0%} for {secs}s with {reloads} reloads: no crash "
                f"({total} requests: {statuses}, {errors} connection errors)", px.log()[-3000:])
        if not px.alive():
            return
        t.check(set(statuses) <= {200, 503, "closed"}, "... every answer a 200 or the proxy's own 503 (or the "
                "connection closed unanswered when it could not get a buffer to read the request)", statuses)
        # with the faults off again: 100% within 2 s
        t0 = time.monotonic()
        ok = H.wait_until(lambda: all(px.get(f"/again/{rate}/{k}", timeout=2)[0] == 200 for k in range(20)), 10,
                          step=0.05)
        took = time.monotonic() - t0
        t.check(ok and took < 2, f"... then, faults off, 20 requests in a row served within {took:.2f}s (< 2 s)")
        log = px.log()[mark:]
        t.check("out of memory while loading it; still serving generation" in log or rate < 0.05,
                "... a reload that could not allocate kept the old config and said so",
                [ln for ln in log.splitlines() if "reload" in ln][-5:])
        s = stats(ap)
        t.check(s is not None, "... and /stats answers")
    last = px.reload()
    t.check(last and last.startswith("reload "), "a reload after the faults succeeds", last)
    log = px.log()
    own = re.findall(r"^\[(?:warn|err|msg|debug)\] .*$", log, re.M)
    routed = re.findall(r"^\S+Z \w+: libevent: .*$", log, re.M)
    t.check(not own, f"libevent's messages come through the proxy's log, with its time stamp and level "
            f"({len(routed)} such lines), none in libevent's own format", own[:5])
    after = stats(ap)
    local = sum(b.get("health_local_errors", 0) for b in after["backends"])
    was = {b["name"]: b["transitions"] for b in before["backends"]}
    moved = [(b["name"], b["transitions"], b["up"]) for b in after["backends"]
             if b["transitions"] != was.get(b["name"]) or not b["up"]]
    t.check(local > 0, f"health checks that failed for want of memory are counted apart "
            f"(health_local_errors {local})")
    t.check(not moved, "... and no backend went down for them", moved)
    t.check(px.stop() == 0, "SIGTERM: exit 0")
    for c in caches:
        c.stop()


def test_clock():
    ctl = H.write(f"clockctl.{time.monotonic_ns()}", "")
    cache = H.Cache(TC, "k1")
    other = H.Cache(TC, "k2")
    px = H.Proxy(RP, H.conf_text([cache, other], proxy={"admin_listen": "127.0.0.1:0"},
                                 cache={"size": "8m", "heuristic_max": "0s"}),
                 "faults-clock", env=shim_env(ctl))
    ap = px.admin_port()
    path = "/clock/a?cc=max-age%3D2"
    for _ in range(3):      # a key's first use is not stored: its second is
        _, h, _ = px.get(path)
    t.check("hit" in h.get("cache-status", ""), "an object with max-age=2 is a hit at once",
            h.get("cache-status"))
    st, _, body = H.get(ap, "/backend?name=k2&state=drain&duration=20s", method="POST")
    t.check(st == 200, "k2 drains over 20 s", body[:200])
    time.sleep(0.5)
    p0 = (next(b for b in stats(ap)["backends"] if b["name"] == "k2").get("drain") or {}).get("progress")
    set_faults(ctl, wall_offset=-3600)
    time.sleep(2.5)
    _, h, _ = px.get(path)
    t.check("; hit" not in h.get("cache-status", "") and "fwd=" in h.get("cache-status", ""),
            "2.5 s later, the wall clock an hour back, it is no longer fresh", h.get("cache-status"))
    s = stats(ap)
    up = s.get("uptime_seconds")
    t.check(isinstance(up, int) and 0 < up < 600, f"uptime_seconds after the jump: {up}")
    p1 = (next(b for b in s["backends"] if b["name"] == "k2").get("drain") or {}).get("progress")
    t.check(p0 is not None and p1 is not None and 0 < p0 < p1 < 1,
            f"a drain's progress goes on through the jump ({p0} -> {p1})")
    t.check(px.stop() == 0, "SIGTERM: exit 0")
    cache.stop()
    other.stop()


def main():
    test_fds()
    if not SHIM:
        t.skip("allocation failures and clock jumps", "no fault shim given")
        return
    if H.sanitizer_of(RP) == "thread":
        t.skip("allocation failures and clock jumps", "TSan's allocator is linked into the binary: "
               "LD_PRELOAD cannot reach its malloc")
        return
    test_alloc()
    test_clock()


H.run_main(t, main)
