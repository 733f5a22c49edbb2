#!/usr/bin/env python3
"""test_purge.py -- purge across the tier: POST /purge?url= on the admin
listener removes every stored variant of the URL from the proxy's cache
and sends PURGE to the owner and the next backends of the URL's walk
([cache] purge_fanout), answering JSON with what was removed and each
backend's status; copies left on other caches by failover and by
spill-over are purged too; a purged object is fetched anew; `ringproxy
purge -c FILE URL` does the same through the admin listener with its
admin_token; PURGE and BAN on the proxy port get 405 unless the client is
in [cache] purge_allow; fanout 0 purges only locally.

The backends are scripted (harness.Fake; testcache's evhttp of libevent
2.1 cannot receive a PURGE method): each counts GETs and PURGEs per path
and can drop connections (down) or answer slowly per path.
usage: test_purge.py RINGPROXY TESTCACHE"""

import http.client
import json
import os
import subprocess
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
TOKEN = "purge-test-token"
lock = harness.COUNTING_LOCK
Backend = harness.Counting


def conf(bes, cache=None, proxy=None, backend=None):
    c = {"size": "8m", "min_uses": 1}      # every storable first miss stored
    c.update(cache or {})
    p = {"workers": 2, "retries": 1, "admin_listen": "127.0.0.1:0", "admin_token": TOKEN}
    p.update(proxy or {})
    return harness.conf_text([(b.name, b.port) for b in bes], proxy=p, ring={"balance_factor": 0},
                             health={"passive": "off"}, cache=c, backend=backend)


def purge(admin, url, method="POST", token=TOKEN):
    c = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
    try:
        c.request(method, "/purge?url=" + urllib.parse.quote(url, safe=""),
                  headers={"Authorization": f"Bearer {token}"} if token else {})
        r = c.getresponse()
        body = r.read().decode()
        return r.status, (json.loads(body) if r.getheader("Content-Type") == "application/json" else body)
    finally:
        c.close()


def walk(admin, path, host):
    """The backend names of the walk of path (/ring?url=), owner first."""
    c = http.client.HTTPConnection("127.0.0.1", admin, timeout=10)
    try:
        c.request("GET", f"/ring?url={urllib.parse.quote(path)}&host={host}&walk=4",
                  headers={"Authorization": f"Bearer {TOKEN}"})
        j = json.loads(c.getresponse().read())
    finally:
        c.close()
    return [w["name"] for w in j["walk"]]


def get(P, path, host="img.test", headers=None):
    h = {"Host": host}
    h.update(headers or {})
    return harness.get(P, path, headers=h)


def main():
    bes = [Backend(f"c{i}") for i in range(4)]
    by = {b.name: b for b in bes}
    proxy = harness.Proxy(RP, conf(bes, backend={"c0": {"max_inflight": 1}, "c1": {"max_inflight": 1},
                                                  "c2": {"max_inflight": 1}, "c3": {"max_inflight": 1}}),
                          tag="purge")
    P = proxy.port
    A = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    # ---- a stored object, purged everywhere its walk goes ------------------
    st, h, b0 = get(P, "/p/1")
    st, h, b = get(P, "/p/1")
    t.check(h.get("cache-status", "").startswith("ringproxy; hit"), "the object is stored in the proxy", h)
    order = walk(A, "/p/1", "img.test")
    st, j = purge(A, "http://img.test/p/1")
    t.check(st == 200 and j["removed"] == 1 and j["key"] == "img.test/p/1",
            "POST /purge?url=: 200, JSON with the objects removed from the proxy's cache", j)
    names = [x["name"] for x in j.get("backends", [])] if st == 200 else []
    t.check(names == order[:3] and all(x["status"] == 200 for x in j["backends"]),
            f"PURGE sent to the first 3 (purge_fanout) distinct backends of the walk, owner first: {names}", j)
    t.check(all(by[n].n("PURGE", "/p/1") == 1 for n in order[:3]) and by[order[3]].n("PURGE", "/p/1") == 0,
            "each of them received exactly one PURGE for the path, the fourth none",
            {b.name: b.n("PURGE", "/p/1") for b in bes})
    with lock:
        hosts = set(by[order[0]].purge_hosts)
    t.check(hosts == {"img.test"}, "the PURGE carries the URL's Host", hosts)
    st, h, b = get(P, "/p/1")
    t.check(st == 200 and h.get("cache-status", "").startswith("ringproxy; fwd=miss") and
            by[order[0]].n("GET", "/p/1") == 2, "a purged object is fetched anew", h)

    # ---- a copy made by failover -------------------------------------------
    order = walk(A, "/f/1", "img.test")
    owner = by[order[0]]
    with lock:
        owner.down.add("/f/1")
    st, h, b = get(P, "/f/1")
    served = h.get("x-ringproxy-backend")
    t.check(st == 200 and served not in (None, owner.name),
            f"with its owner {owner.name} failing, /f/1 is served by {served} (a copy there now)", h)
    st, j = purge(A, "http://img.test/f/1")
    t.check(st == 200 and served and by[served].n("PURGE", "/f/1") == 1 and owner.n("PURGE", "/f/1") == 1,
            "the purge reaches the owner and the backend failover put the copy on", j)
    with lock:
        owner.down.discard("/f/1")

    # ---- a copy made by spill-over (owner at its max_inflight) -------------
    order = walk(A, "/s/1", "img.test")
    owner = by[order[0]]
    with lock:
        owner.slow.add("/s/1")
    res = {}

    def slow_one():
        res["slow"] = get(P, "/s/1", headers={"Cache-Control": "no-store"})

    th = threading.Thread(target=slow_one)
    th.start()
    harness.wait_until(lambda: owner.n("GET", "/s/1") == 1, 5)
    st, h, b = get(P, "/s/1")
    th.join(10)
    spilled = h.get("x-ringproxy-backend")
    t.check(st == 200 and spilled not in (None, owner.name),
            f"with its owner {owner.name} at max_inflight, /s/1 spills to {spilled} (a copy there now)", h)
    st, j = purge(A, "http://img.test/s/1")
    t.check(st == 200 and spilled and by[spilled].n("PURGE", "/s/1") == 1 and owner.n("PURGE", "/s/1") == 1,
            "the purge reaches the owner and the spill-over backend", j)
    with lock:
        owner.slow.discard("/s/1")
    st, h, b = get(P, "/s/1")
    t.check(h.get("cache-status", "").startswith("ringproxy; fwd=miss"), "... and the proxy fetches it anew", h)

    # ---- the admin listener's rules ----------------------------------------
    st, body = purge(A, "http://img.test/p/1", method="GET")
    t.check(st == 405, "GET /purge: 405 (POST only)", body)
    st, body = purge(A, "http://img.test/p/1", token=None)
    t.check(st == 401, "a purge without the admin_token: 401", body)
    st, body = purge(A, "/p/1")
    t.check(st == 400, "a URL without a host: 400", body)
    st, j = purge(A, "http://img.test/not-stored")
    t.check(st == 200 and j["removed"] == 0 and len(j["backends"]) == 3,
            "purging a URL the proxy does not hold removes nothing here, still reaches the backends", j)

    # ---- ringproxy purge -c FILE URL ----------------------------------------
    get(P, "/cli/1")
    cli_conf = harness.write("purge-cli.ini", conf(bes, proxy={"admin_listen": f"127.0.0.1:{A}"}))
    before = sum(b.n("PURGE", "/cli/1") for b in bes)
    r = subprocess.run([RP, "purge", "-c", cli_conf, "http://img.test/cli/1"], capture_output=True, timeout=60)
    out = json.loads(r.stdout) if r.returncode == 0 else r.stderr
    t.check(r.returncode == 0 and out["removed"] == 1 and
            sum(b.n("PURGE", "/cli/1") for b in bes) - before == 3,
            "ringproxy purge -c FILE URL: through the admin listener with the token; JSON on stdout", out)
    bad = harness.write("purge-bad.ini", conf(bes, proxy={"admin_listen": f"127.0.0.1:{A}", "admin_token": "wrong"}))
    r = subprocess.run([RP, "purge", "-c", bad, "http://img.test/cli/1"], capture_output=True, timeout=60)
    t.check(r.returncode == 1, "... exits 1 when the admin listener refuses it (wrong token)", r.stderr)

    # ---- backends that refuse: the purge fails, in the JSON and the exit ---
    get(P, "/r/1")
    for b in bes:
        b.purge_status = 501
    st, j = purge(A, "http://img.test/r/1")
    t.check(st == 502 and isinstance(j, dict) and j.get("result") == "failed" and j.get("failed") == 3 and
            j["removed"] == 1 and all(x["status"] == 501 and x["result"] == "refused: status 501" for x in j["backends"]),
            "every backend answering 501: 502, result failed, each backend refused (the proxy's copy removed)", j)
    r = subprocess.run([RP, "purge", "-c", cli_conf, "http://img.test/r/1"], capture_output=True, timeout=60)
    out = json.loads(r.stdout) if r.stdout.strip() else {"stderr": r.stderr}
    t.check(r.returncode == 1 and out.get("result") == "failed" and b"kept its copy" in r.stderr,
            "ringproxy purge: the JSON says failed and it exits 1", (r.returncode, out, r.stderr))
    order = walk(A, "/r/2", "img.test")
    by[order[0]].purge_status = 404
    by[order[1]].purge_status = 204
    by[order[2]].purge_status = 403
    st, j = purge(A, "http://img.test/r/2")
    t.check(st == 502 and isinstance(j, dict) and [x["result"] for x in j["backends"]] ==
            ["ok: nothing stored there", "ok", "refused: status 403"] and j.get("failed") == 1,
            "404 is nothing to purge (ok), 204 ok, 403 refused: one failure fails the purge", j)
    by[order[2]].purge_status = 404
    r = subprocess.run([RP, "purge", "-c", cli_conf, "http://img.test/r/2"], capture_output=True, timeout=60)
    out = json.loads(r.stdout) if r.returncode == 0 else {"stderr": r.stderr}
    t.check(r.returncode == 0 and out.get("result") == "ok" and out.get("failed") == 0,
            "ringproxy purge: 2xx and 404 from every backend is success, exit 0", out)
    for b in bes:
        b.purge_status = 200

    # ---- PURGE and BAN on the proxy port ------------------------------------
    before = sum(b.n("PURGE", "/p/1") for b in bes)
    st, h, b = get(P, "/p/1")
    st, h, b = harness.get(P, "/p/1", method="PURGE", headers={"Host": "img.test"})
    st2, h2, b2 = harness.get(P, "/p/1", method="BAN", headers={"Host": "img.test"})
    t.check(st == 405 and st2 == 405 and sum(x.n("PURGE", "/p/1") for x in bes) == before,
            "PURGE and BAN on the proxy port from a client not in purge_allow: 405, nothing forwarded", (st, st2))
    st, h, b = get(P, "/p/1")
    t.check(h.get("cache-status", "").startswith("ringproxy; hit"), "... and the proxy's copy stays", h)
    t.check(proxy.stop() == 0, "the proxy exits cleanly")

    proxy = harness.Proxy(RP, conf(bes, cache={"purge_allow": "10.0.0.0/8, 127.0.0.0/8", "purge_fanout": 0}),
                          tag="purge-allow")
    P = proxy.port
    A = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    before = sum(b.n("PURGE", "/a/1") for b in bes)
    st, h, b = harness.get(P, "/a/1", method="PURGE", headers={"Host": "img.test"})
    t.check(st == 200 and sum(x.n("PURGE", "/a/1") for x in bes) == before + 1,
            "a client in purge_allow (127.0.0.0/8): its PURGE is forwarded to the owner", st)
    get(P, "/a/2")
    st, h, b = get(P, "/a/2")
    for x in bes:
        x.purge_status = 501
    st2, h2, b2 = harness.get(P, "/a/2", method="PURGE", headers={"Host": "img.test"})
    for x in bes:
        x.purge_status = 200
    st3, h3, b3 = get(P, "/a/2")
    t.check(h.get("cache-status", "").startswith("ringproxy; hit") and st2 == 501 and
            h3.get("cache-status", "").startswith("ringproxy; fwd=miss"),
            "a PURGE the backend answers 501: the client sees 501, and the proxy's own copy is dropped",
            (h.get("cache-status"), st2, h3.get("cache-status")))
    get(P, "/z/1")
    before = sum(b.n("PURGE", "/z/1") for b in bes)
    st, j = purge(A, "http://img.test/z/1")
    t.check(st == 200 and j["removed"] == 1 and j["backends"] == [] and
            sum(x.n("PURGE", "/z/1") for x in bes) == before,
            "purge_fanout = 0: removed from the proxy only, no backend contacted", j)
    t.check(proxy.stop() == 0, "the proxy exits cleanly (purge_allow)")
    bad = harness.write("purge-badallow.ini", conf(bes, cache={"purge_allow": "10.0.0.0/33"}))
    r = subprocess.run([RP, "-t", "-c", bad], capture_output=True, timeout=30)
    t.check(r.returncode != 0 and b"purge_allow" in r.stderr, "a bad purge_allow entry is a config error", r.stderr)


harness.run_main(t, main)
