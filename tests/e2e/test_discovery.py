#!/usr/bin/env python3
"""test_discovery.py -- membership from DNS SRV ([discovery] srv) against a
real DNS server (unbound on 127.0.0.1, records changed live with
unbound-control) and test caches as a StatefulSet's pods: a start from the
first answer; a scale 3 -> 4 -> 3 under load, each change planned, reported
and ramped like a reload, no request failed; a pod restart (its name gone
from DNS, back on another port) that moves no key and keeps the
fingerprint; NXDOMAIN, REFUSED and a stopped DNS server that change
nothing; 60 targets (a truncated UDP answer, asked again over TCP); a mass
removal held until `ringproxy ctl discovery apply`; a second proxy polling
out of phase that reaches the same fingerprint within two apply_every
periods; a restart while the DNS server is stopped that starts with the
ring it had. Times are scaled down (interval 100 ms, which the records'
TTL of 1 s makes a poll a second; apply_every 500 ms, remove_after 1.5 s)
so that the test is short.
usage: test_discovery.py RINGPROXY TESTCACHE"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dns  # noqa: E402
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()

SRV = "_http._tcp.cache.ns.svc.cluster.local."
SUFFIX = ".cache.ns.svc.cluster.local."
APPLY = 0.5                     # [discovery] apply_every, seconds
REMOVE = 1.5                    # remove_after


def fqdn(name):
    return name + SUFFIX


def conf(port, state, srv=SRV):
    return f"""[proxy]
listen = 127.0.0.1:0
admin_listen = 127.0.0.1:{H.free_port()}
workers = 2
state_file = {state}
[ring]
ramp = 2s
balance_factor = 0
[health]
fall = 1
backoff = 200ms
[cache]
size = 0
[discovery]
srv = {srv}
resolver = 127.0.0.1:{port}
interval = 100ms
remove_after = {REMOVE}s
apply_every = {APPLY}s
max_remove = 50%
"""


def stats(px):
    with urllib.request.urlopen(f"http://127.0.0.1:{px.admin}/stats", timeout=10) as r:
        return json.loads(r.read())


def fp(px):
    return stats(px)["ring_fingerprint_hex"]


def names(px):
    return sorted(b["name"] for b in stats(px)["backends"])


def start(text, tag):
    px = H.Proxy(RP, text, tag)
    px.admin = px.admin_port()
    return px


def main():
    if not dns.have_unbound():
        t.skip("discovery against unbound", "unbound is not installed (tests/deps.sh test)")
        return
    pods = {f"cache-{i}": H.Cache(TC, f"cache-{i}") for i in range(4)}
    records = [f"{fqdn(n)} 1 IN A 127.0.0.1" for n in pods]
    records += [f"{SRV} 1 IN SRV 0 33 {pods[n].port} {fqdn(n)}" for n in ("cache-0", "cache-1", "cache-2")]
    u = dns.Unbound(records)

    def serve(*members):
        u.set_srv(SRV, [(fqdn(n), pods[n].port) for n in members])

    state = H.tmp_path("state")
    text = conf(u.port, state)
    px = start(text, "a")
    t.check(px.wait_log(r"discovery: starting with the 3 members of the first answer", 5) is not None and
            names(px) == ["cache-0", "cache-1", "cache-2"],
            "no backend in the file: it starts with the first answer's 3 targets", px.log()[-800:])
    t.check(stats(px)["discovery"]["poll"]["interval_ms"] == 1000,
            "interval 100ms, records of TTL 1 s: a poll a second, never faster than the TTL")
    pb = start(conf(u.port, H.tmp_path("state-b")), "b")
    t.check(fp(px) == fp(pb), "a second proxy started later has the same ring (fingerprint)")

    # ---- scale 3 -> 4 -> 3 under load ------------------------------------
    results, stop = [], threading.Event()

    def loader():
        while not stop.is_set() and len(results) < 200000:
            results.extend(H.load(px.port, lambda i: f"/img/{i % 3000}.jpg", clients=8, seconds=0.5,
                                  max_requests=4000))
    lt = threading.Thread(target=loader)
    lt.start()
    mark = px.log_size()
    serve("cache-0", "cache-1", "cache-2", "cache-3")
    up = px.wait_log(r"reload (\d+) \(dns-srv\): \+cache-3; ([0-9.]+)% of keys moved, all to cache-3; "
                     r"ramping over 2s; ring ([0-9a-f]{16})", 10, mark)
    t.check(up is not None and 15 < float(up.group(2)) < 35,
            "scale to 4: one reload line, planned (a quarter of the keys moved, all to cache-3) and ramped",
            px.log()[mark:][-800:])
    t.check(H.wait_until(lambda: fp(pb) == fp(px), 2 * APPLY + 1) and up and fp(px) == up.group(3),
            "the proxy polling out of phase has the same fingerprint within two apply_every periods")
    mark = px.log_size()
    serve("cache-0", "cache-1", "cache-2")
    down = px.wait_log(r"reload \d+ \(dns-srv\): -cache-3; ([0-9.]+)% of keys moved", 10, mark)
    t.check(down is not None, "scale back to 3: cache-3 leaves after remove_after, reported", px.log()[mark:][-800:])
    t.check(H.wait_until(lambda: fp(pb) == fp(px), 2 * APPLY + 1), "... and the other proxy follows")
    stop.set()
    lt.join()
    failed = [r for r in results if r[1] != 200]
    t.check(len(results) > 0 and not failed, f"no request failed while scaling ({len(results)} requests)",
            str(failed[:5]))

    # ---- answers that alternate every poll (a DNS server of its own, in
    # the background of the next two parts): nothing ever changes -----------
    u2 = dns.Unbound(records)
    pc = start(conf(u2.port, H.tmp_path("state-c")).replace("interval = 100ms", "interval = 400ms")
               .replace(f"apply_every = {APPLY}s", "apply_every = 0"), "c")
    alt = {}

    def alternate():
        sets = [("cache-0", "cache-1", "cache-2", "cache-3"), ("cache-0", "cache-1")]
        ports = {n: pods[n].port for n in pods}  # cache-1 moves meanwhile: not here
        gen0, polls, flips = stats(pc)["generation"], stats(pc)["discovery"]["poll"]["rounds"], 0
        deadline = time.monotonic() + 30
        while flips < 10 and time.monotonic() < deadline:
            # right after a poll ended, so that the next one sees the other set
            if H.wait_until(lambda: stats(pc)["discovery"]["poll"]["rounds"] > polls, 5, 0.01):
                polls = stats(pc)["discovery"]["poll"]["rounds"]
                u2.set_srv(SRV, [(fqdn(n), ports[n]) for n in sets[flips % 2]])
                flips += 1
        alt.update(flips=flips, gen=stats(pc)["generation"] - gen0, names=names(pc))
    at = threading.Thread(target=alternate)
    at.start()

    # ---- a pod restart: gone from DNS for a while, back on another port ----
    before, gen = fp(px), stats(px)["generation"]
    mark = px.log_size()
    pods["cache-1"].stop()
    serve("cache-0", "cache-2")
    time.sleep(REMOVE / 3)
    st = [H.get(px.port, f"/img/{i}.jpg")[0] for i in range(60)]
    # back well within remove_after (the gap is what a restart's is to 120 s)
    pods["cache-1"].start(0)
    serve("cache-0", "cache-1", "cache-2")
    t.check(st.count(200) == 60, "while cache-1 is gone its keys are served by the next caches",
            str(st))
    t.check(px.wait_log(r"discovery: a discovered backend went down or came back: polling now", 5, mark) is not None,
            "its failed connects make the proxy poll at once")
    moved = px.wait_log(r"reload \d+ \(dns-srv\): @cache-1 \(new url http://127\.0\.0\.1:"
                        + str(pods["cache-1"].port) + r"\); 0\.000% of keys moved; ring ([0-9a-f]{16})", 10, mark)
    t.check(moved is not None and moved.group(1) == before and fp(px) == before,
            "back on another port: a reload for the address, 0 keys moved, the fingerprint unchanged",
            px.log()[mark:][-800:])
    time.sleep(REMOVE + APPLY)
    t.check("-cache-1" not in px.log()[mark:] and names(px) == ["cache-0", "cache-1", "cache-2"] and
            stats(px)["generation"] == gen + 1, "it never left the ring")
    t.check(H.wait_until(lambda: H.get(px.port, "/img/x.jpg")[0] == 200, 5), "and serves again")

    # ---- failures change nothing --------------------------------------------
    gen, before = stats(px)["generation"], fp(px)
    u.set_srv(SRV, [])
    t.check(H.wait_until(lambda: stats(px)["discovery"]["failures"]["nxdomain"] > 0, 5),
            "NXDOMAIN for the whole name is counted")
    time.sleep(REMOVE + APPLY)
    serve("cache-0", "cache-1", "cache-2")
    r = u.control("local_zone", "cache.ns.svc.cluster.local.", "always_refuse")
    t.check(r.returncode == 0 and H.wait_until(lambda: stats(px)["discovery"]["failures"]["refused"] > 0, 5),
            "REFUSED is counted", r.stdout + r.stderr)
    u.control("local_zone_remove", "cache.ns.svc.cluster.local.")
    u.freeze()
    t.check(H.wait_until(lambda: stats(px)["discovery"]["failures"]["timeout"] > 0, 10),
            "a stopped DNS server: timeouts counted")
    time.sleep(REMOVE)
    d = stats(px)["discovery"]
    t.check(stats(px)["generation"] == gen and fp(px) == before and d["last_failure"] == "timeout" and
            d["last_good_age_seconds"] > REMOVE,
            "after NXDOMAIN, REFUSED and timeouts longer than remove_after the ring is as it was", json.dumps(d))
    u.thaw()
    t.check(H.wait_until(lambda: stats(px)["discovery"]["last_failure"] is None, 10),
            "the server back: answers are good again")

    at.join()
    t.check(alt.get("flips") == 10 and alt.get("gen") == 0 and alt.get("names") == ["cache-0", "cache-1", "cache-2"],
            "answers alternating between two sets every poll (10 polls): the ring never changes", str(alt))
    pc.stop()
    u2.stop()

    # ---- 60 targets: over 512 bytes, asked again over TCP; a mass removal --
    many = [f"pod-{i:02d}" for i in range(60)]
    u.add(*[f"{fqdn(n)} 1 IN A 127.0.0.1" for n in many])
    mark = px.log_size()
    u.set_srv(SRV, [(fqdn(n), pods[f"cache-{i % 3}"].port) for i, n in enumerate(many)] +
              [(fqdn(n), pods[n].port) for n in ("cache-0", "cache-1", "cache-2")])
    big = px.wait_log(r"reload \d+ \(dns-srv\): \+pod-00 [^\n]*", 10, mark)
    d = stats(px)["discovery"]
    t.check(big is not None and len(names(px)) == 63 and d["poll"]["targets"] == 63 and d["poll"]["tcp"],
            "60 more targets: a truncated answer asked again over TCP, all 63 on the ring", json.dumps(d["poll"]))
    t.check(H.wait_until(lambda: fp(pb) == fp(px), 2 * APPLY + 1), "the other proxy has the same 63")
    mark = px.log_size()
    serve("cache-0", "cache-1", "cache-2")
    held = px.wait_log(r"discovery: 60 members absent for remove_after would leave, more than max_remove", 10, mark)
    time.sleep(APPLY * 2)
    t.check(held is not None and len(names(px)) == 63 and stats(px)["discovery"]["held_removes"] == 60,
            "removing 60 of 63 is held, and said", px.log()[mark:][-600:])
    with urllib.request.urlopen(f"http://127.0.0.1:{px.admin}/", timeout=10) as resp:
        page = resp.read().decode()
    t.check(f'id="ring-fingerprint">{fp(px)}<' in page and "60 removals held" in page,
            "the page shows the fingerprint and the held removal")
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{px.admin}/metrics", timeout=10).read().decode()
    t.check(f"ringproxy_ring_fingerprint {int(fp(px), 16) >> 12}\n" in metrics and
            "ringproxy_discovery_held_removes 60\n" in metrics and
            "ringproxy_discovery_failures_nxdomain_total " in metrics,
            "/metrics: the fingerprint as a number, the held removals, failures by kind")
    r = subprocess.run([RP, "ctl", "-c", px.conf, "discovery", "apply"], capture_output=True, text=True, timeout=30)
    gone = px.wait_log(r"reload \d+ \(dns-srv\): -pod-00 ", 10, mark)
    t.check(r.returncode == 0 and '"released": 60' in r.stdout and gone is not None and len(names(px)) == 3,
            "ringproxy ctl discovery apply: the 60 leave", r.stdout + r.stderr)
    r = subprocess.run([RP, "ctl", "-c", pb.conf, "discovery", "apply"], capture_output=True, text=True, timeout=30)
    t.check(r.returncode == 0 and H.wait_until(lambda: fp(pb) == fp(px), 2 * APPLY + 1),
            "the other proxy, applied too, agrees again")

    # ---- a restart while the DNS server is stopped -------------------------
    before = fp(px)
    px.stop()
    u.freeze()
    px = start(text, "a2")
    t.check(px.wait_log(r"discovery: starting with the 3 members last applied", 5) is not None and fp(px) == before,
            "restarted while the DNS server is stopped: the ring it had", px.log()[-600:])
    u.thaw()
    u.stop()


H.run_main(t, main)
