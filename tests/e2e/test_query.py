#!/usr/bin/env python3
"""test_query.py -- [ring] query = sorted and drop_params against
backends that record every target they get: two orderings of a
thumbnail's parameters and one with tracker parameters go to the same
backend, the proxy's cache holds one object (the second request is a
hit) and the backend sees the normalised target; with normalize_forward
= off the backend gets the target as sent while routing and caching stay
normalised; /ring?url=, `ringproxy plan --keys` over the access log's
targets and the access log agree with the proxy; every [ring] scheme
routes the orderings alike; a reload that changes query says how many
keys may move.
usage: test_query.py RINGPROXY TESTCACHE"""

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
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
NAMES = ["cache-a", "cache-b", "cache-c"]
SANITIZER = []


class Recording:
    """A cache that answers every GET 200 (max-age=60) with its name and
    the target it got, and records each target."""

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.targets = []
        self.fake = H.Fake(self.handler)
        self.port = self.fake.port

    def handler(self, fake, s, n):
        for method, target, _, _, _ in fake.requests(s):
            with self.lock:
                self.targets.append(target)
            body = f"{self.name} {target}\n".encode()
            s.sendall(b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Type: image/jpeg\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def seen(self, path=None):
        """The targets got (for path: those whose path it is)."""
        with self.lock:
            return [x for x in self.targets if path is None or x.split("?")[0] == path]


def conf(bes, ring, log):
    ring = dict({"balance_factor": 0}, **ring)
    return H.conf_text([(b.name, b.port) for b in bes], proxy={"admin_listen": "127.0.0.1:0"}, ring=ring,
                       cache={"size": "1m", "min_uses": 1}) + f"\n[log]\naccess = {log}\naccess_format = json\n"


def get(port, target):
    """(status, backend, Cache-Status, body): the backend a hit was
    stored from too ("NAME; cached")."""
    st, h, body = H.get(port, target)
    be = h.get("x-ringproxy-backend")
    return st, be.split(";")[0] if be else None, h.get("cache-status", ""), body


def admin_ring(aport, url):
    c = http.client.HTTPConnection("127.0.0.1", aport, timeout=10)
    try:
        c.request("GET", "/ring?" + urllib.parse.urlencode({"url": url}))
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        c.close()


def run(*args):
    p = subprocess.run([RP, *args], capture_output=True, text=True, timeout=60)
    SANITIZER.extend(ln for ln in p.stderr.splitlines() if "runtime error:" in ln or "Sanitizer" in ln)
    return p.returncode, p.stdout, p.stderr


# Thumbnails as clients send them: each group is one object.
GROUPS = [
    ["/t/%d.jpg?w=200&h=200" % i, "/t/%d.jpg?h=200&w=200" % i,
     "/t/%d.jpg?utm_source=news&h=200&fbclid=x%d&w=200&utm_medium=mail" % (i, i)]
    for i in range(24)
]
NORMAL = ["/t/%d.jpg?h=200&w=200" % i for i in range(24)]


def main():
    bes = [Recording(n) for n in NAMES]
    alog = H.tmp_path("query-access.%d.log" % time.monotonic_ns())
    path = H.write("query.%d.ini" % time.monotonic_ns(),
                   conf(bes, {"query": "sorted", "drop_params": "utm_*, fbclid, gclid"}, alog))
    px = H.Proxy(RP, path=path)
    aport = int(px.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    # -- the orderings and the tracker: one backend, one fetch, hits after
    served, hits, fetches, wrong = {}, 0, 0, []
    for g, want in zip(GROUPS, NORMAL):
        got = [get(px.port, x) for x in g]
        served[want] = {be for _, be, _, _ in got}
        hits += sum("hit" in cs for _, _, cs, _ in got[1:])
        p = want.split("?")[0]
        seen = [x for b in bes for x in b.seen(p)]
        fetches += len(seen)
        wrong += [x for x in seen if x != want]
    t.check(all(len(v) == 1 and None not in v for v in served.values()),
            "two orderings and a tracker-laden URL of each of 24 thumbnails go to one backend",
            {k: v for k, v in served.items() if len(v) != 1})
    t.check(fetches == 24 and hits == 48, "the cache holds one object each: one fetch, the other two are hits",
            (fetches, hits))
    t.check(not wrong, "the backend sees the normalised target (sorted, trackers dropped)", wrong[:4])
    t.check(len({be for v in served.values() for be in v}) > 1, "the thumbnails spread over the backends",
            served)

    st, be, _, _ = get(px.port, "/t/solo.jpg?utm_source=x&gclid=y")
    t.check(st == 200 and [x for b in bes for x in b.seen("/t/solo.jpg")] == ["/t/solo.jpg"],
            "a query of trackers alone is forwarded without its '?'", [x for b in bes for x in b.seen("/t/solo.jpg")])

    # -- /ring?url= agrees, raw URL given
    disagree = []
    for g, want in zip(GROUPS, NORMAL):
        st, j = admin_ring(aport, g[2])
        if st != 200 or j.get("key") != want or j.get("target") != next(iter(served[want])):
            disagree.append((g[2], st, j.get("key"), j.get("target"), served[want]))
    t.check(not disagree, "/ring?url= keys a raw URL as the proxy does and names the backend that served it",
            disagree[:3])

    # -- the access log: targets as sent; plan --keys over them agrees
    deadline = time.monotonic() + 10
    lines = []
    while time.monotonic() < deadline:
        with open(alog) if os.path.exists(alog) else open(os.devnull) as f:
            lines = [json.loads(ln) for ln in f if ln.strip()]
        if len(lines) >= 73:
            break
        time.sleep(0.1)
    sent = {x: next(iter(served[want])) for g, want in zip(GROUPS, NORMAL) for x in g}
    logged = {ln["target"] for ln in lines if ln["target"] in sent}
    t.check(logged == set(sent), "the access log has the targets as the clients sent them",
            sorted(set(sent) - logged)[:3])
    keys = H.write("query-keys.%d.txt" % time.monotonic_ns(), "".join(tg + "\n" for tg in sorted(logged)))
    rc, out, err = run("plan", path, "--keys", keys, "--per-key")
    owner = dict(ln.split("\t")[:2] for ln in out.splitlines() if "\t" in ln)
    mism = [(tg, sent[tg], owner.get(tg)) for tg in logged if owner.get(tg) != sent[tg]]
    t.check(rc == 0 and len(owner) == len(logged) and not mism,
            "plan --keys over the access log's targets names the backend that served each", (rc, err, mism[:3]))

    # -- normalize_forward = off: routed and cached normalised, sent as is
    for b in bes:
        with b.lock:
            b.targets.clear()
    H.write(path, conf(bes, {"query": "sorted", "drop_params": "utm_*, fbclid, gclid",
                             "normalize_forward": "off"}, alog))
    rl = px.reload()
    t.check(rl and rl.startswith("reload") and "moved" in rl, "normalize_forward = off reloads", rl)
    raw = "/f/a.jpg?w=64&utm_campaign=c&h=64"
    st1, be1, cs1, _ = get(px.port, raw)
    st2, be2, cs2, _ = get(px.port, "/f/a.jpg?h=64&w=64")
    seen = [x for b in bes for x in b.seen("/f/a.jpg")]
    t.check(st1 == 200 and seen == [raw], "normalize_forward = off: the backend gets the target as sent", seen)
    t.check(st2 == 200 and be2 == be1 and "hit" in cs2 and len(seen) == 1,
            "normalize_forward = off: the other ordering is the same object, a hit on the same backend",
            (be1, be2, cs2))
    st, j = admin_ring(aport, "/f/a.jpg?h=64&w=64")
    t.check(st == 200 and j.get("target") == be1 and j.get("key") == "/f/a.jpg?h=64&w=64",
            "normalize_forward = off: /ring?url= still keys normalised", j.get("key"))

    # -- every scheme: the orderings meet, the backend sees one target
    for scheme, extra in [("nginx", {}), ("haproxy", {"key": "uri+query"}), ("ketama", {}), ("envoy", {})]:
        for b in bes:
            with b.lock:
                b.targets.clear()
        H.write(path, conf(bes, dict({"query": "sorted", "drop_params": "utm_*, fbclid, gclid",
                                      "scheme": scheme}, **extra), alog))
        rl = px.reload()
        ok = bool(rl and rl.startswith("reload"))
        bad = []
        for i, (g, want) in enumerate(zip(GROUPS[:8], NORMAL[:8])):
            g = [x.replace("/t/", "/%s/" % scheme) for x in g]
            want = want.replace("/t/", "/%s/" % scheme)
            got = {get(px.port, x)[1] for x in g}
            seen = [x for b in bes for x in b.seen(want.split("?")[0])]
            st, j = admin_ring(aport, g[0])
            if len(got) != 1 or seen != [want] or j.get("target") not in got:
                bad.append((g[0], got, seen, j.get("target")))
        t.check(ok and not bad, "scheme %s: the orderings go to one backend, fetched once normalised, "
                "as /ring?url= says" % scheme, (rl, bad[:2]))

    # -- a reload that changes query says what may move
    H.write(path, conf(bes, {"query": "as-is"}, alog))
    rl = px.reload() or ""
    t.check("query sorted -> as-is, drop_params 'utm_*, fbclid, gclid' -> ''" in rl and "probability" in rl,
            "a reload that changes query and drop_params says how many of the rewritten keys move", rl)
    for b in bes:
        with b.lock:
            b.targets.clear()
    d1, d2 = "/d/a.jpg?w=1&utm_source=z&&h=2", "/d/a.jpg?h=2&w=1"
    _, _, cs1, _ = get(px.port, d1)
    _, _, cs2, _ = get(px.port, d2)
    seen = sorted(x for b in bes for x in b.seen("/d/a.jpg"))
    t.check(seen == sorted([d1, d2]) and "hit" not in cs2,
            "as-is without drop_params (the default): every target is keyed and sent as received", (seen, cs2))

    old = H.write("query-old.%d.ini" % time.monotonic_ns(), conf(bes, {"query": "as-is"}, "off"))
    new = H.write("query-new.%d.ini" % time.monotonic_ns(), conf(bes, {"query": "sorted"}, "off"))
    rc, out, err = run("plan", old, new, "--keys", keys)
    m = re.search(r"moved: +[0-9.]+% of the keyspace, (\d+) of (\d+) keys", out)
    t.check(rc == 0 and "[ring] query as-is -> sorted: the key list is keyed both ways" in out and m
            and 0 < int(m.group(1)) < int(m.group(2)),
            "plan --keys counts the keys a change of query moves (some, not all)", out[-700:])
    t.check(not SANITIZER, "no sanitizer report from the plan runs", SANITIZER[:3])
    px.stop()
    for b in bes:
        b.fake.stop()


H.run_main(t, main)
