#!/usr/bin/env python3
"""test_where.py -- "where does this URL go, and why" on the admin
listener: /ring?key= (the string hashed) and /ring?url= (a request target,
keyed by [ring] key), against the backend that actually served each
request (X-Ringproxy-Backend) and the independent ring model; the walk's
reasons (down, at max_inflight, over the bounded-load cap); ?format=text.
usage: test_where.py RINGPROXY TESTCACHE"""

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import ringref  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
NAMES = ["cache-a", "cache-b", "cache-c", "cache-d"]




class Admin:
    """One keep-alive connection to the admin listener."""

    def __init__(self, port):
        self.port = port
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def get(self, path):
        self.c.request("GET", path)
        r = self.c.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read().decode()

    def where(self, **q):
        st, ctype, body = self.get("/ring?" + urllib.parse.urlencode(q))
        if st != 200:
            raise RuntimeError(f"/ring?{q}: {st} {body}")
        return json.loads(body)

    def close(self):
        self.c.close()


def settled(adm, **q):
    """/ring's answer once nothing is in flight (at most 2 s)."""
    deadline = time.monotonic() + 2
    while True:
        w = adm.where(**q)
        if all(x["inflight"] == 0 for x in w["walk"]) or time.monotonic() > deadline:
            return w
        time.sleep(0.005)


def agreement(proxy, adm, ring):
    """1,000 keys: what /ring says against what the proxy does. Returns
    {path: backend that served it}."""
    conn = proxy.http()
    served_by = {}
    served_ok = url_ok = key_ok = model_ok = keys_ok = 0
    bad = []
    for i in range(1000):
        # parameters out of order: path+sorted-query keys them sorted
        path = f"/t/{i}.jpg?w={i % 13}&fmt=webp&h={i % 7}"
        want_key = f"/t/{i}.jpg?fmt=webp&h={i % 7}&w={i % 13}"
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        served = r.getheader("X-Ringproxy-Backend")
        served_by[path] = served
        # the proxy lets go of the backend's slot just after the last
        # byte reaches us: ask once nothing is in flight
        w = settled(adm, url=path)
        k = adm.where(key=want_key)
        keys_ok += w["key"] == want_key
        url_ok += w["target"] == served
        key_ok += k["target"] == served and k["position"] == w["position"]
        model_ok += w["owner"] == ring.lookup(want_key.encode()) and \
            w["position"] == ringref.h64(want_key.encode())
        served_ok += r.status == 200
        if w["target"] != served and len(bad) < 5:
            bad.append((path, served, w))
    conn.close()
    t.check(served_ok == 1000, "1,000 requests answered 200", f"{served_ok}")
    t.check(keys_ok == 1000, "/ring?url= hashes the key [ring] key = path+sorted-query makes of it "
            "(parameters sorted)", f"{keys_ok} of 1000")
    t.check(url_ok == 1000, "/ring?url=: its target is the backend that served the request, "
            "for 1,000 keys", f"{url_ok} of 1000: {bad}")
    t.check(key_ok == 1000, "/ring?key= with the key string: same position and target", f"{key_ok}")
    t.check(model_ok == 1000, "position and owner agree with the independent ring model", f"{model_ok}")
    return served_by


def plan_agrees(proxy, served_by):
    """`ringproxy plan --keys F --per-key` keys each line as the proxy
    did: the owner it prints is the backend that served the request."""
    keys = harness.write("where-keys.txt", "".join(p + "\n" for p in served_by))
    p = subprocess.run([RP, "plan", proxy.conf, "--keys", keys, "--per-key"], capture_output=True, text=True,
                       timeout=60)
    rows = dict(line.split("\t") for line in p.stdout.splitlines())
    same = sum(rows.get(k) == v for k, v in served_by.items())
    t.check(p.returncode == 0 and same == len(served_by),
            f"plan --per-key under [ring] key = path+sorted-query: the owner of each of {len(served_by)} "
            "keys is the backend that served it", f"{same} {p.stderr}")
    p = subprocess.run([RP, "plan", proxy.conf, "--keys", keys, "--per-key", "--raw-keys"], capture_output=True,
                       text=True, timeout=60)
    rows = dict(line.split("\t") for line in p.stdout.splitlines())
    t.check(p.returncode == 0 and sum(rows.get(k) == v for k, v in served_by.items()) < len(served_by),
            "with --raw-keys (the query hashed unsorted) some land elsewhere: the old behaviour, kept on request")


def shape(adm):
    w = adm.where(key="/hello.jpg", walk=4)
    t.check(set(["key", "position", "owner", "walk", "target", "cached"]) <= set(w),
            "the JSON has key, position, owner, walk, target, cached", str(sorted(w)))
    t.check(w["key"] == "/hello.jpg" and w["cached"] is None,
            "key is the string hashed; cached is null without a cache", str(w))
    t.check(len(w["walk"]) == 4 and len({x["name"] for x in w["walk"]}) == 4 and
            w["walk"][0]["name"] == w["owner"],
            "walk=4 lists four distinct backends, the owner first", str(w["walk"]))
    t.check(all(x["eligible"] is True and x["why"] == "" for x in w["walk"]),
            "an idle tier: every backend of the walk would take it, with no reason against",
            str(w["walk"]))
    st, ctype, body = adm.get("/ring?key=/hello.jpg&format=text")
    t.check(st == 200 and ctype.startswith("text/plain") and
            f"goes to   {w['target']} (owner)" in body and "walk\n  1. " in body,
            "?format=text: the same answer for people", body)
    st, _, body = adm.get("/ring?url=" + urllib.parse.quote("GET / HTTP/1.1"))
    t.check(st == 400 and "not a request target" in body,
            "url= that no client could send: 400 saying why", f"{st} {body}")
    st, _, body = adm.get("/ring?key=a&url=/b")
    t.check(st == 400, "key= and url= together: 400", f"{st} {body}")
    st, _, body = adm.get("/ring")
    t.check(st == 200 and "backends" in json.loads(body), "/ring alone: the ring as before")
    w = adm.where(key="\u00e9t\u00e9/\u2603")
    t.check(w["key"] == "\u00e9t\u00e9/\u2603", "a UTF-8 key comes back as written", w["key"])
    st, _, body = adm.get("/ring?key=%ff%fe")
    t.check(st == 200 and json.loads(body)["key"] == "\ufffd\ufffd",
            "bytes that are not UTF-8 come back as U+FFFD: the JSON stays valid", body)


def hold(port, path, out):
    """GET path (a slow one) and put (status, backend) in out."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        out.append((r.status, r.getheader("X-Ringproxy-Backend")))
        c.close()
    except OSError as e:
        out.append((0, str(e)))


def reasons(caches):
    """max_inflight, the bounded-load cap and a down backend, each with
    the numbers, and the request going where /ring said."""
    ports = {c.name: c.port for c in caches}
    ring = ringref.Ring([(n, 1.0) for n in NAMES])
    key = "/hot/1.jpg"
    owner = ring.lookup(key.encode())
    conf = harness.conf_by_name(NAMES, ports, ring={"key": "path", "balance_factor": 0},
                                proxy={"admin_listen": "127.0.0.1:0", "workers": 1},
                                backend={owner: {"max_inflight": 1}})
    proxy = harness.Proxy(RP, conf, tag="where-cap")
    adm = Admin(proxy.admin_port())
    out = []
    th = threading.Thread(target=hold, args=(proxy.port, key + "?delay=1500", out))
    th.start()
    ok = harness.wait_until(lambda: adm.where(key=key)["walk"][0]["inflight"] == 1, 5)
    w = adm.where(key=key)
    first = w["walk"][0]
    t.check(ok and first["name"] == owner and first["eligible"] is False and
            first["verdict"] == "full" and first["why"] == "at max_inflight: 1 in flight of 1",
            "the owner at max_inflight: not eligible, with its numbers", json.dumps(first))
    t.check(w["target"] == w["walk"][1]["name"] and w["route"].startswith("spill"),
            "target: the next distinct backend of the walk (spill)", str(w))
    st, hdrs, _ = proxy.get(key)
    t.check(st == 200 and hdrs.get("x-ringproxy-backend") == w["target"],
            "a request meanwhile goes where /ring said", f"{st} {hdrs.get('x-ringproxy-backend')}")
    th.join(10)
    t.check(out and out[0] == (200, owner), "the slow request itself was the owner's", str(out))
    adm.close()
    proxy.stop()

    # bounded loads: c = 1, two slow requests to the owner of the key
    conf = harness.conf_by_name(NAMES, ports, ring={"key": "path", "balance_factor": 1},
                                proxy={"admin_listen": "127.0.0.1:0", "workers": 1})
    proxy = harness.Proxy(RP, conf, tag="where-bounded")
    adm = Admin(proxy.admin_port())
    # the cap moves only hot keys: these make the key all of the recent
    # requests (at least 8 counts)
    for i in range(12):
        proxy.get(key + f"?n=warm{i}")
    t.check(adm.where(key=key)["walk"][0]["hot"] is True, "a key that is all of the requests is hot")
    out = []
    ths = [threading.Thread(target=hold, args=(proxy.port, key + f"?delay=1500&n={i}", out))
           for i in range(2)]
    ths[0].start()
    harness.wait_until(lambda: adm.where(key=key)["walk"][0]["inflight"] == 1, 5)
    ths[1].start()
    # the second slow one spilled: total 2 in flight, owner has 1
    harness.wait_until(lambda: json.loads(adm.get("/stats")[2])["inflight"] == 2, 5)
    w = adm.where(key=key)
    first = w["walk"][0]
    # cap = ceil(1 x (2 + 1) x 1 / 4) = 1: the owner (1 in flight) is at it
    t.check(first["verdict"] == "bounded" and first["cap"] == 1 and first["total_inflight"] == 2 and
            first["why"].startswith("over its bounded-load cap: 1 in flight, cap 1 = ceil(1 x (2 in flight in all + 1)"),
            "the owner over its bounded-load cap: the formula with its numbers", json.dumps(first))
    t.check(first["hot"] is True and first["rare_cap"] is None,
            "a hot key is bounded by the cap itself (rare_cap null)", json.dumps(first))
    rare = next((f"/rare/{n}.jpg" for n in range(200)
                 if adm.where(key=f"/rare/{n}.jpg")["walk"][0]["name"] == owner), None)
    rw = adm.where(key=rare)["walk"][0] if rare else {}
    # hot keys carried a share h of the recent requests: a rare key on the
    # same owner is bounded by cap x (1 - h) / 2h, never below the cap
    t.check(rw.get("hot") is False and isinstance(rw.get("rare_cap"), int) and
            rw["rare_cap"] >= first["cap"],
            "a rare key on the same owner: its own bound (rare_cap), at least the cap", json.dumps(rw))
    for th in ths:
        th.join(10)
    adm.close()
    proxy.stop()

    # a down backend: passive checks with fall = 1
    victim = caches[NAMES.index(owner)]
    conf = harness.conf_by_name(NAMES, ports, ring={"key": "path", "balance_factor": 0},
                                proxy={"admin_listen": "127.0.0.1:0", "workers": 1, "retries": 0},
                                health={"fall": 1, "backoff": "60s"})
    proxy = harness.Proxy(RP, conf, tag="where-down")
    adm = Admin(proxy.admin_port())
    victim.stop()
    proxy.get(key)                  # fails: the owner goes down
    harness.wait_until(lambda: adm.where(key=key)["walk"][0]["verdict"] == "down", 5)
    w = adm.where(key=key)
    t.check(w["walk"][0]["verdict"] == "down" and w["walk"][0]["why"].startswith("down") and
            w["route"].startswith("failover"),
            "the owner down: not eligible, 'failover' to the next", str(w))
    st, hdrs, _ = proxy.get(key)
    t.check(st == 200 and hdrs.get("x-ringproxy-backend") == w["target"],
            "and the request goes there", f"{st} {hdrs}")
    adm.close()
    proxy.stop()
    victim.start(victim.port)


def cached(caches):
    """A hit from the proxy's cache says so in X-Ringproxy-Backend, with
    the backend that filled it, also after a reload moved the URL (where
    /ring names the new owner); /ring?key= given a full URL refuses and
    names the url= to ask; the demo's curl shows the ringproxy lines."""
    ports = {c.name: c.port for c in caches}
    three, four = ringref.Ring([(n, 1.0) for n in NAMES[:3]]), ringref.Ring([(n, 1.0) for n in NAMES])
    key = next(f"/moved/{i}.jpg" for i in range(10000)
               if four.lookup(f"/moved/{i}.jpg".encode()) == NAMES[3])
    old = three.lookup(key.encode())
    kw = dict(ring={"key": "path"}, proxy={"admin_listen": "127.0.0.1:0", "workers": 1},
              cache={"size": "1m", "min_uses": 1})
    path = harness.write("where-cached.ini", harness.conf_by_name(NAMES[:3], ports, **kw))
    proxy = harness.Proxy(RP, path=path, tag="where-cached")
    adm = Admin(proxy.admin_port())
    st1, h1, _ = proxy.get(key)
    st2, h2, _ = proxy.get(key)
    t.check(st1 == 200 and h1.get("x-ringproxy-backend") == old and
            h2.get("cache-status", "").startswith("ringproxy; hit") and
            h2.get("x-ringproxy-backend") == f"{old}; cached",
            f"a miss names the backend ({old}); the hit from the proxy's cache says '{old}; cached'",
            [h1.get("x-ringproxy-backend"), h2.get("cache-status"), h2.get("x-ringproxy-backend")])
    harness.write("where-cached.ini", harness.conf_by_name(NAMES, ports, **kw))
    line = proxy.reload()
    w = adm.where(url=key)
    st3, h3, _ = proxy.get(key)
    got = h3.get("x-ringproxy-backend", "")
    t.check(line and line.startswith("reload 2") and w["owner"] == NAMES[3] and
            got == f"{old}; cached" and got.split(";")[0] == old,
            f"after a reload gives {key} to {NAMES[3]} (/ring's owner), the hit still served from the proxy's "
            f"cache says '{old}; cached': who filled it, and that it is not where the ring sends the URL",
            [line, w["owner"], got])

    # a full URL in key=: refused, naming the url= to ask
    st, _, body = adm.get("/ring?key=" + urllib.parse.quote(f"http://img.test{key}", safe=""))
    want = "/ring?url=" + urllib.parse.quote(f"http://img.test{key}", safe="")
    t.check(st == 400 and "is a full URL" in body and want in body,
            "/ring?key=http://...: 400 naming the url= to ask", f"{st} {body}")
    st, _, body = adm.get(want)
    t.check(st == 200 and json.loads(body)["key"] == key and json.loads(body)["owner"] == NAMES[3],
            "... and that url= answers for the URL's key", body[:300])
    st, _, body = adm.get("/")
    t.check(st == 200 and 'href="/ring?url=' in body, "the page links the url= form", st)

    # the demo's first curl shows the whole head, ringproxy's lines too
    demo = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo.sh")).read()
    m = re.search(r"^  (curl -si http://127\.0\.0\.1:8080(\S+) \| [^#\n]*?)\s*(#.*)?$", demo, re.M)
    if m:
        cmd = m.group(1).replace("127.0.0.1:8080", f"127.0.0.1:{proxy.port}")
        out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30).stdout
    t.check(m and re.search(r"^X-Ringproxy-Backend: \S+", out, re.M | re.I) and
            re.search(r"^Cache-Status: ringproxy", out, re.M | re.I) and "\r\n\r\n" not in out,
            "the demo's curl command prints the response head with X-Ringproxy-Backend and Cache-Status",
            m and out)
    adm.close()
    proxy.stop()


def main():
    caches = [harness.Cache(TC, n) for n in NAMES]
    ports = {c.name: c.port for c in caches}
    ring = ringref.Ring([(n, 1.0) for n in NAMES])
    conf = harness.conf_by_name(NAMES, ports, ring={"key": "path+sorted-query"},
                                proxy={"admin_listen": "127.0.0.1:0"})
    proxy = harness.Proxy(RP, conf, tag="where")
    adm = Admin(proxy.admin_port())
    shape(adm)
    served_by = agreement(proxy, adm, ring)
    plan_agrees(proxy, served_by)
    adm.close()
    proxy.stop()
    reasons(caches)
    cached(caches)


harness.run_main(t, main)
