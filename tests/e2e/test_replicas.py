#!/usr/bin/env python3
"""test_replicas.py -- [ring] replicas = 2 over four caches: a key's
preference list is the first two distinct backends of its walk (/ring?url=
and `ringproxy plan --per-key` say the same list); requests in sequence go
to its first member (ties to the first); concurrent requests split across
the two members and reach no other cache; a member that dies leaves the
other serving every request at once, no request reaching a third cache,
and /ring names the survivor; POST /purge reaches both members even with
[cache] purge_fanout = 1; `ringproxy plan` gives each backend's share as
primary and as replica (summing to 2); a reload that adds a cache reports
the share of keys whose list changed.

The backends are scripted (harness.Counting, as in test_purge.py:
testcache's evhttp cannot receive PURGE): each counts requests per method
and path, answers one path after 0.6 s, and can be killed (its listener
and connections closed: connection refused).
usage: test_replicas.py RINGPROXY TESTCACHE"""

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
TOKEN = "replicas-test-token"
lock = threading.Lock()
SLOW = "/slow/hot.jpg"


def backend(name):
    """A scripted cache (harness.Counting) answering SLOW after 0.6 s."""
    b = harness.Counting(name, slow_s=0.6)
    b.slow.add(SLOW)
    return b


def conf(bes, fanout=1):
    return harness.conf_text([(b.name, b.port) for b in bes],
                             proxy={"workers": 2, "retries": 1, "admin_listen": "127.0.0.1:0",
                                    "admin_token": TOKEN},
                             # a factor that lets 4 concurrent requests of one hot key sit on
                             # its two members: what the cap does over the list is
                             # test-balance's (the cap would move the hot key past the list
                             # once both members hold their fair share)
                             ring={"replicas": 2, "balance_factor": 3},
                             health={"fall": 2, "backoff": "60s"},
                             cache={"size": 0, "purge_fanout": fanout})


def admin(A, method, path):
    c = http.client.HTTPConnection("127.0.0.1", A, timeout=30)
    try:
        c.request(method, path, headers={"Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        body = r.read().decode()
        return r.status, (json.loads(body) if r.status == 200 else body)
    finally:
        c.close()


def ring(A, path):
    st, j = admin(A, "GET", f"/ring?url={urllib.parse.quote(path)}&host=img.test")
    return j if st == 200 else {}


def get(P, path):
    return harness.get(P, path, headers={"Host": "img.test"})


def served_by(body):
    return body.decode().split(" ")[0]


def concurrent(P, path, n):
    """n requests for path at once; their statuses and serving backends."""
    out = []

    def one():
        st, _, b = get(P, path)
        with lock:
            out.append((st, served_by(b) if st == 200 else None))

    th = [threading.Thread(target=one) for _ in range(n)]
    for x in th:
        x.start()
    for x in th:
        x.join(30)
    return out


def main():
    bes = [backend(f"c{i}") for i in range(4)]
    by = {b.name: b for b in bes}
    path = harness.tmp_path("replicas.ini")
    with open(path, "w") as f:
        f.write(conf(bes))
    proxy = harness.Proxy(RP, path=path, tag="replicas")
    P = proxy.port
    A = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    # ---- the list: /ring and plan agree, two distinct backends -------------
    key = SLOW
    j = ring(A, key)
    lst = j.get("list", [])
    walk = [w["name"] for w in j.get("walk", [])]
    t.check(len(lst) == 2 and lst[0] != lst[1] and lst == walk[:2] and j.get("owner") == lst[0],
            "/ring?url= gives the key's list: the first 2 distinct backends of its walk, owner first",
            json.dumps(j)[:400])
    if len(lst) != 2:
        return
    first, second = by[lst[0]], by[lst[1]]
    others = [b for b in bes if b.name not in lst]
    kf = harness.write("replicas.keys", key + "\n")
    r = subprocess.run([RP, "plan", path, "--keys", kf, "--per-key"], capture_output=True, text=True,
                       timeout=60)
    t.check(r.returncode == 0 and r.stdout.strip().split("\t")[-1] == ",".join(lst),
            "plan --per-key prints the same list", r.stdout + r.stderr)
    r = subprocess.run([RP, "plan", path, "--json"], capture_output=True, text=True, timeout=60)
    try:
        pj = json.loads(r.stdout)["backends"]
    except (ValueError, KeyError):
        pj = []
    t.check(len(pj) == 4 and abs(sum(b["share"] for b in pj) - 1) < 1e-9 and
            abs(sum(b["share"] + b["replica_share"] for b in pj) - 2) < 1e-9 and
            all(0 < b["replica_share"] < 1 for b in pj),
            "plan: shares as primary sum to 1, as primary and replica to 2", r.stdout[:400] + r.stderr)
    r = subprocess.run([RP, "plan", path], capture_output=True, text=True, timeout=60)
    t.check(r.returncode == 0 and "replica" in r.stdout and "replicas 2" in r.stdout,
            "plan's text has the replica column", r.stdout)

    # ---- in sequence: the first member (ties to the first) -----------------
    # a key whose primary is the key's primary above (killed below)
    seq, sl = None, []
    for i in range(200):
        sl = ring(A, f"/seq/{i}.jpg").get("list", [])
        if sl and sl[0] == first.name:
            seq = f"/seq/{i}.jpg"
            break
    if seq is None:
        t.check(False, "a key of the same primary among 200")
        return
    # each request is a new connection, which may reach the other worker
    # before the first has let go of the previous request's in-flight
    # slot (after its response went out): then c0 has one in flight and
    # the next goes to c1, rightly. "Nothing in flight" is waited for
    def idle():
        st, j = admin(A, "GET", "/stats")
        return st == 200 and j.get("inflight") == 0
    for _ in range(6):
        harness.wait_until(idle, 5)
        get(P, seq)
    t.check(len(sl) == 2 and by[sl[0]].n("GET", seq) == 6 and
            sum(b.n("GET", seq) for b in bes) == 6,
            "requests one after another: all on the list's first (nothing in flight, a tie)",
            str({b.name: b.n("GET", seq) for b in bes}))

    # ---- at once: split across the two members, none elsewhere -------------
    rounds = [concurrent(P, key, 4) for _ in range(3)]
    res = [x for rr in rounds for x in rr]
    t.check(all(st == 200 for st, _ in res), "12 concurrent requests (3 rounds of 4) answered 200",
            str(res))
    t.check(first.n("GET", key) >= 3 and second.n("GET", key) >= 3 and
            sum(b.n("GET", key) for b in others) == 0,
            "concurrent requests for the key split across its two replicas, none reach the other caches",
            str({b.name: b.n("GET", key) for b in bes}))
    t.note("split: " + str({b.name: b.n("GET", key) for b in bes}))

    # ---- purge reaches both members, fanout 1 notwithstanding --------------
    st, pj = admin(A, "POST", "/purge?url=" + urllib.parse.quote("http://img.test" + key, safe=""))
    names = sorted(b["name"] for b in pj.get("backends", [])) if st == 200 else []
    t.check(st == 200 and names == sorted(lst) and first.n("PURGE", key) == 1 and
            second.n("PURGE", key) == 1 and sum(b.n("PURGE", key) for b in others) == 0,
            "POST /purge with purge_fanout = 1 reaches both replicas and no other cache",
            f"{st} {pj}")

    # ---- a member dies: the other serves at once, no third cache -----------
    before = {b.name: b.total() for b in bes}
    first.fake.stop()
    res = [get(P, key)[0] for _ in range(10)]
    res += [st for st, _ in concurrent(P, key, 4)]  # cap ceil(3 x 4 / 3) = 4: no spill
    after = {b.name: b.total() for b in bes}
    t.check(all(st == 200 for st in res), "the primary killed: every request answered 200", str(res))
    t.check(all(after[b.name] == before[b.name] for b in others) and
            after[second.name] - before[second.name] == 14,
            "the primary killed: its replica serves all 14, no request reaches a third cache",
            f"{before} -> {after}")
    j = ring(A, key)
    t.check(j.get("target") == second.name and j.get("list") == lst and j.get("reason") == "failover",
            "/ring?url= then names the replica as the one serving (failover), the list unchanged",
            json.dumps(j)[:600])
    t.check(ring(A, seq).get("target") == sl[1],
            "/ring?url= of another key of the dead primary names its replica")

    # ---- a reload that adds a cache reports the changed lists --------------
    extra = backend("c4")
    with open(path, "w") as f:
        f.write(conf(bes + [extra]))
    line = proxy.reload() or ""
    t.check("changed a member of their list of replicas" in line,
            "a reload report says the share of keys whose list changed", line)


harness.run_main(t, main)
