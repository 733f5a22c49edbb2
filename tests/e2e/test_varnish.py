#!/usr/bin/env python3
"""test_varnish.py -- ringproxy in front of three real Varnish 7.1 caches
(-s malloc,32m, each with its own working directory, tests/e2e/varnish.vcl:
/health answered by Varnish, PURGE from ringproxy's address, Host in the
hash) and an origin that counts its fetches (a testcache). Checks what an
operator relies on: each key is routed where `ringproxy plan` says; a
second request is a hit at its owner (X-Varnish has two ids, the origin
saw one fetch); a killed Varnish fails over and its keys come back after
it restarts; a purge through ringproxy's admin listener reaches the
owner (a client's PURGE on the proxy port gets 405); what
X-Forwarded-For carries; and why passive_5xx stays off in front of
caches (an origin outage makes Varnish answer 503: with passive_5xx on the
caches are marked down and objects the tier holds get 503 from ringproxy).
Skips only where varnishd is not installed (Debian package varnish).
usage: test_varnish.py RINGPROXY TESTCACHE"""

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402
from varnishd import VARNISHD, Varnish  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()


def fetches(origin):
    """Requests the origin has served so far."""
    return origin.stats()["requests"]


def xvarnish_ids(headers):
    """The ids in X-Varnish: one on a miss, two on a hit."""
    return headers.get("x-varnish", "").split()


def plan_owner(conf, key):
    """The backend `ringproxy plan --keys` puts key on."""
    p = subprocess.run([RP, "plan", conf, "--keys", "-", "--json"], input=key + "\n",
                       capture_output=True, text=True, timeout=60)
    doc = json.loads(p.stdout)
    return next((b["name"] for b in doc["backends"] if b.get("keys") == 1), None)


def stats(admin):
    """The proxy's /stats backends by name."""
    st, _, body = H.get(admin, "/stats")
    return {b["name"]: b for b in json.loads(body)["backends"]} if st == 200 else {}


def main():
    if not VARNISHD:
        t.skip("ringproxy in front of Varnish", "varnishd not found (Debian package varnish: "
               "bash tests/deps.sh test installs it)")
        return
    origin = H.Cache(TC, "origin")
    names = ["v1", "v2", "v3"]
    caches = {n: Varnish(n, origin.port) for n in names}
    for v in caches.values():
        v.start()
    text = H.conf_text([(n, caches[n].port) for n in names],
                       proxy={"admin_listen": "127.0.0.1:0", "workers": 2},
                       ring={"balance_factor": 0},
                       health={"path": "/health", "interval": "300ms", "rise": 2, "fall": 2})
    conf = H.write("varnish.ini", text)
    px = H.Proxy(RP, tag="varnish", path=conf)
    px.wait_checked(names)
    admin = int(px.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/").group(1))
    ring = ringref.ring_of(conf)
    keys = [f"/thumbs/{i}_200x200.jpg" for i in range(90)]

    # ---- routing: where plan says, at every cache -----------------------
    first = {}
    for k in keys:
        st, h, body = px.get(k)
        first[k] = (st, h.get("x-ringproxy-backend"), xvarnish_ids(h))
    t.check(all(first[k][0] == 200 for k in keys), "90 thumbnails through ringproxy and Varnish: all 200")
    wrong = {k: first[k][1] for k in keys if first[k][1] != ring.lookup(k.encode())}
    t.check(not wrong, "each key served by its ring owner (the model)", wrong)
    sample = keys[:12]
    by_plan = {k: plan_owner(conf, k) for k in sample}
    t.check(all(by_plan[k] == first[k][1] for k in sample),
            f"ringproxy plan --keys names the cache that served each of {len(sample)} keys",
            {k: (by_plan[k], first[k][1]) for k in sample})
    t.check({first[k][1] for k in keys} == set(names), "every cache got keys")
    t.check(all(len(first[k][2]) == 1 for k in keys) and fetches(origin) == len(keys),
            f"first requests: misses (one X-Varnish id), one origin fetch each ({fetches(origin)})")

    # ---- a second request is a hit at the owner -------------------------
    before = fetches(origin)
    again = {k: px.get(k) for k in keys}
    t.check(all(again[k][0] == 200 and len(xvarnish_ids(again[k][1])) == 2 and
                again[k][1].get("x-ringproxy-backend") == first[k][1] for k in keys),
            "second requests: hits at the same cache (X-Varnish shows two ids)")
    t.check(fetches(origin) == before, f"the origin saw no new fetch ({fetches(origin) - before})")
    # the same URL for two hosts: one owner, two objects (Host is hashed)
    before = fetches(origin)
    a = px.get("/thumbs/shared.jpg", headers={"Host": "a.example"})
    b = px.get("/thumbs/shared.jpg", headers={"Host": "b.example"})
    t.check(a[1].get("x-ringproxy-backend") == b[1].get("x-ringproxy-backend") and
            fetches(origin) - before == 2 and a[1].get("x-echo-host") == "a.example" and
            b[1].get("x-echo-host") == "b.example",
            "one URL with two Hosts: the same cache, two objects (Host kept and in the hash)")

    # ---- X-Forwarded-For as the origin sees it ---------------------------
    st, h, _ = px.get("/thumbs/xff.jpg", headers={"X-Forwarded-For": "203.0.113.7"})
    t.check(h.get("x-echo-x-forwarded-for") == "203.0.113.7, 127.0.0.1, 127.0.0.1",
            f"X-Forwarded-For at the origin: the client's own, then its address (ringproxy), "
            f"then ringproxy's (Varnish) "
            f"({h.get('x-echo-x-forwarded-for')})")

    # ---- a purge through ringproxy's admin listener reaches the owner -----
    k = keys[5]
    st, h, body = px.get(k, method="PURGE")
    t.check(st == 405, f"a client's PURGE {k} on the proxy port: 405 (not in [cache] purge_allow)", st)
    c = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
    c.request("POST", "/purge?url=" + urllib.parse.quote(f"http://127.0.0.1:{px.port}{k}", safe=""))
    r = c.getresponse()
    j = json.loads(r.read()) if r.status == 200 else {}
    c.close()
    be = j.get("backends", [])
    t.check(r.status == 200 and be and be[0]["name"] == first[k][1] and all(x["status"] == 200 for x in be),
            f"POST /purge?url= on the admin listener: PURGE reaches the owner {first[k][1]} first, "
            f"and Varnish's ACL (ringproxy's address) lets it through", j)
    before = fetches(origin)
    st, h, _ = px.get(k)
    t.check(st == 200 and len(xvarnish_ids(h)) == 1 and fetches(origin) == before + 1,
            "the next GET is a miss: the origin fetched it again")

    # ---- a killed Varnish fails over; its keys come back -----------------
    victim = "v2"
    theirs = [k for k in keys if first[k][1] == victim]
    caches[victim].stop(signal.SIGKILL)
    walk = {k: next(n for n in ring.walk(k.encode()) if n != victim) for k in theirs}
    got = {k: px.get(k) for k in theirs}
    t.check(all(got[k][0] == 200 and got[k][1].get("x-ringproxy-backend") == walk[k] for k in theirs),
            f"v2 killed (SIGKILL): its {len(theirs)} keys served by the next cache on the ring, all 200",
            {k: (got[k][0], got[k][1].get("x-ringproxy-backend")) for k in theirs})
    t.check(H.wait_until(lambda: not stats(admin)["v2"]["up"], 5), "v2 is marked down")
    caches[victim].start()

    def back():
        return all(px.get(k)[1].get("x-ringproxy-backend") == victim for k in theirs)
    t.check(H.wait_until(back, 15, step=0.2), "v2 restarted: its keys come back to it")

    # ---- an origin outage: why passive_5xx stays off ---------------------
    origin.stop()
    held = [k for k in keys if first[k][1] != victim][:20]  # still in cache
    got = [px.get(k)[0] for k in held]
    st, h, _ = px.get("/thumbs/never-fetched.jpg")
    t.check(all(s == 200 for s in got), "origin down: objects the tier holds are still served (hits)")
    t.check(st == 503 and h.get("x-varnish"), "origin down: a miss gets Varnish's own 503, passed on")
    time.sleep(0.7)
    t.check(all(b["up"] for b in stats(admin).values()),
            "passive_5xx = off: no cache is marked down for the origin's outage")
    since = px.log_size()
    with open(conf, "w") as f:
        f.write(text.replace("[health]\n", "[health]\npassive_5xx = on\n"))
    r = px.reload()
    t.check(r and r.startswith("reload 2"), f"reload with passive_5xx = on ({r})")
    misses = [px.get(f"/thumbs/miss-{i}.jpg")[0] for i in range(12)]
    downs = sum(1 for b in stats(admin).values() if not b["up"])
    got = [px.get(k)[0] for k in held]
    t.check(downs >= 2 and any(s != 200 for s in got),
            f"passive_5xx = on: the misses' 503s took {downs} of 3 caches down, and "
            f"{sum(1 for s in got if s != 200)} of {len(held)} requests for objects the tier holds failed")
    t.check(re.search(r"backend v\d: up -> down \(5xx responses", px.log()[since:]),
            "the log says why: 5xx responses", px.log()[since:][-1500:])
    t.check(set(misses) <= {502, 503}, f"(the misses themselves: {sorted(set(misses))})")
    px.stop()
    for v in caches.values():
        v.stop()


H.run_main(t, main)
