#!/usr/bin/env python3
"""test_scheme.py -- [ring] scheme as a tier switching to ringproxy sees it:
the proxy started with scheme = haproxy or scheme = nginx in front of test
caches sends every request target of the unit test's vectors (made by the
real HAProxy 2.6 and the real NGINX, tests/unit/scheme/) to the cache that
proxy chose, each backend given by the identity the proxy hashed (a HAProxy
id, an NGINX server string) while its url is a test cache's; the key mode
follows the scheme (HAProxy's uri up to '?', NGINX's $request_uri) and
[ring] key still overrides it (a reload to key = path is HAProxy's
path-only). The admin listener's /ring?url= names the same owner, and
`ringproxy plan OLD NEW --keys` between the NGINX file and the native one
counts exactly the keys that move.

Then the move off the old placement: a reload from scheme = haproxy (key
uri) to the native ring (key path+query) with a long [ring] ramp keeps each
key whose moment is still ahead on HAProxy's choice, and /ring?url= says
so (previous owner, held, target); a reload from scheme = nginx to the
native ring with [ring] ramp says the scheme change and the share moved,
and during the window each moved key stays on its NGINX owner until its own
moment (start + ramp x u, u from the key's MD5 bytes 8..15), then goes to
its native owner (ringref.py), as the warm ramp does within one scheme.
usage: test_scheme.py RINGPROXY TESTCACHE"""

import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit", "scheme")
RAMP = 6.0


def routes(port, targets):
    """[(target, backend, t_sent, t_answered)] for GETs of targets, one
    keep-alive connection; backend from X-Ringproxy-Backend."""
    out = []
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for tg in targets:
            t0 = time.time()
            c.putrequest("GET", tg, skip_host=True, skip_accept_encoding=True)
            c.putheader("Host", "thumbs.example")
            c.endheaders()
            r = c.getresponse()
            r.read()
            out.append((tg, r.getheader("X-Ringproxy-Backend") if r.status == 200 else f"status {r.status}",
                        t0, time.time()))
    finally:
        c.close()
    return out


def mismatches(port, want):
    """The (target, got, wanted) of want's targets that went elsewhere."""
    got = routes(port, list(want))
    return [(tg, b, want[tg]) for tg, b, _, _ in got if b != want[tg]]


def u_of(key):
    """A key's place in a ramp's window: MD5 bytes 8..15 over 2^64."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[8:16], "big") / 2.0 ** 64


def haproxy_vectors():
    """servers [(name, id or None, weight)] and {mode: {target: backend}}."""
    servers, modes = [], {}
    with open(os.path.join(VECTORS, "haproxy-uri.txt")) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "server":
                servers.append((w[1], None if w[2] == "-" else w[2], int(w[3])))
            else:
                modes.setdefault(w[0], {})[w[1]] = w[2]
    return servers, modes


def test_haproxy():
    servers, modes = haproxy_vectors()
    caches = [H.Cache(TC, name) for name, _, _ in servers]
    backend = {name: {"weight": w, **({"id": sid} if sid else {})} for name, sid, w in servers}
    admin = {"admin_listen": "127.0.0.1:0"}
    path = H.write(f"haproxy.{time.monotonic_ns()}.ini",
                   H.conf_text(caches, proxy=admin, ring={"scheme": "haproxy", "balance_factor": 0},
                               backend=backend))
    p = H.Proxy(RP, path=path)
    bad = mismatches(p.port, modes["uri"])
    t.check(not bad, f"scheme = haproxy: each of {len(modes['uri'])} targets (origin and absolute form, queries, "
            f"%-escapes) reaches the cache real HAProxy's balance uri chose", bad[:5])
    m = p.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10)
    wrong = []
    c = http.client.HTTPConnection("127.0.0.1", int(m.group(1)) if m else 1, timeout=10)
    for tg in list(modes["uri"])[:100]:
        c.request("GET", "/ring?" + urllib.parse.urlencode({"url": tg, "host": "thumbs.example"}))
        r = c.getresponse()
        body = r.read().decode()
        owner = json.loads(body).get("owner") if r.status == 200 else body
        if owner != modes["uri"][tg]:
            wrong.append((tg, owner, modes["uri"][tg]))
    c.close()
    t.check(m and not wrong, "/ring?url= names the owner HAProxy chose for each of 100 targets", wrong[:5])
    for mode, key in (("path", "path"), ("uri+query", "uri+query")):
        text = H.conf_text(caches, proxy=admin, ring={"scheme": "haproxy", "balance_factor": 0, "key": key},
                           backend=backend)
        with open(path, "w") as f:
            f.write(text)
        line = p.reload()
        t.check(line and line.startswith("reload"), f"reload to key = {key}", line)
        bad = mismatches(p.port, modes[mode])
        t.check(not bad, f"scheme = haproxy, key = {key}: each target reaches the cache HAProxy's balance uri "
                f"{'path-only' if key == 'path' else 'whole'} chose", bad[:5])

    # from the last of those (balance uri whole) to the native ring (and
    # its own key, path+query) over a long ramp: a key whose moment is
    # more than 20 s away is still where HAProxy put it, and /ring?url=
    # says it is held there
    prev = modes["uri+query"]
    with open(path, "w") as f:
        f.write(H.conf_text(caches, proxy=admin, ring={"balance_factor": 0, "ramp": "10m"},
                            backend={name: {"weight": w} for name, _, w in servers}))
    line = p.reload()
    t0 = time.time()
    t.check(line and "scheme haproxy -> ringproxy" in line and "ramping over 10m" in line,
            "reload scheme = haproxy -> the native ring, ramped", line)
    late = [tg for tg in prev if u_of(tg[len("http://thumbs.example"):] if tg.startswith("http:")
                                              else tg) * 600 > 20 + time.time() - t0]
    got = routes(p.port, late)
    c = http.client.HTTPConnection("127.0.0.1", int(m.group(1)) if m else 1, timeout=10)
    wrong, held = [], 0
    for tg, b, _, _ in got:
        c.request("GET", "/ring?" + urllib.parse.urlencode({"url": tg, "host": "thumbs.example"}))
        r = c.getresponse()
        j = json.loads(r.read().decode()) if r.status == 200 else {}
        held += j.get("owner") != prev[tg]
        if b != prev[tg] or j.get("target") != prev[tg] or \
                (j.get("owner") != prev[tg] and (j.get("ramp") or {}).get("held") is not True):
            wrong.append((tg, b, j.get("owner"), j.get("target"), j.get("ramp"), prev[tg]))
    c.close()
    t.check(time.time() - t0 < 20 and not wrong and held > len(late) // 2,
            f"ramp haproxy -> ringproxy: {len(late)} keys before their moment stay on HAProxy's choice, "
            f"{held} of them moved and held there as /ring?url= says", wrong[:3])
    p.stop()
    for c in caches:
        c.stop()


def nginx_vectors():
    """{uri: server string} as real NGINX placed them."""
    want = {}
    with open(os.path.join(VECTORS, "nginx-upstream.csv")) as f:
        for line in f:
            if line.startswith("#") or "," not in line:
                continue
            uri, server = line.strip().split(",")
            want[uri] = server
    return want


def test_nginx_and_ramp():
    want = nginx_vectors()
    names = [f"s{k}" for k in range(1, 10)]
    caches = [H.Cache(TC, n) for n in names]
    # the url is the test cache; the identity NGINX hashed is the id
    backend = {n: {"weight": 100, "id": f"10.0.0.{k}:443"} for k, n in enumerate(names, 1)}
    ring = {"scheme": "nginx", "balance_factor": 0, "ramp": "6s"}
    path = H.write(f"nginx.{time.monotonic_ns()}.ini", H.conf_text(caches, ring=ring, backend=backend))
    p = H.Proxy(RP, path=path)
    by_name = {f"10.0.0.{k}:443": n for k, n in enumerate(names, 1)}
    old = {uri: by_name[s] for uri, s in want.items()}
    bad = mismatches(p.port, old)
    t.check(not bad, f"scheme = nginx: each of {len(old)} URIs real NGINX placed reaches that server's cache, "
            "the server string given as id", bad[:5])

    # the move to the native ring, ramped
    del ring["scheme"]
    native_path = H.write(f"native.{time.monotonic_ns()}.ini",
                          H.conf_text(caches, ring=ring, backend={n: {"weight": 100} for n in names}))
    native = ringref.Ring([(n, 100) for n in names])
    new = {uri: native.lookup(uri.encode()) for uri in want}
    moved = [uri for uri in want if new[uri] != old[uri]]
    keys = H.write(f"keys.{time.monotonic_ns()}.txt", "".join(u + "\n" for u in want))
    out = subprocess.run([RP, "plan", path, native_path, "--keys", keys], capture_output=True, text=True).stdout
    m = re.search(r"moved: +([0-9.]+)% of the keyspace, (\d+) of (\d+) keys", out)
    t.check(m and int(m.group(2)) == len(moved) and int(m.group(3)) == len(want) and "scheme nginx -> ringproxy" in out,
            f"plan nginx.ini native.ini --keys: {len(moved)} of {len(want)} keys move, each file keying by its "
            "own scheme", out[-600:])
    with open(native_path) as f, open(path, "w") as g:
        g.write(f.read())
    t0 = time.time()
    line = p.reload()
    t1 = time.time()
    t.check(line and "scheme nginx -> ringproxy" in line and "ramping over 6s" in line,
            "the reload says the scheme change, the share moved and the ramp", line)
    # a key's moment is in [t0, t1] + RAMP x u: before it, its NGINX owner;
    # after, its native one
    wrong, early, late = [], 0, 0
    deadline = t1 + RAMP + 2
    while time.time() < deadline:
        for uri, b, ts, ta in routes(p.port, moved):
            m = RAMP * u_of(uri)
            if ta < t0 + m - 0.03:
                early += 1
                if b != old[uri]:
                    wrong.append((uri, b, "held on", old[uri], round(ta - t0, 3), round(m, 3)))
            elif ts > t1 + m + 0.03:
                late += 1
                if b != new[uri]:
                    wrong.append((uri, b, "moved to", new[uri], round(ts - t1, 3), round(m, 3)))
    t.check(not wrong and early > len(moved) // 2 and late > len(moved) // 2,
            f"ramp nginx -> ringproxy: {len(moved)} of {len(want)} keys move; {early} answers before a key's "
            f"moment from its NGINX owner, {late} after from its native owner", wrong[:5])
    bad = mismatches(p.port, new)
    t.check(not bad, "after the window every key is at its native owner", bad[:5])
    p.stop()
    for c in caches:
        c.stop()


def main():
    test_haproxy()
    test_nginx_and_ramp()


H.run_main(t, main)
