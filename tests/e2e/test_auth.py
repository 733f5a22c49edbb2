#!/usr/bin/env python3
"""test_auth.py -- [proxy] admin_token: every admin request needs
"Authorization: Bearer TOKEN" (401 with WWW-Authenticate otherwise), a
reload changes the token, and an admin_listen that is not a loopback
address is refused without one, at start and at -t, saying why.
usage: test_auth.py RINGPROXY TESTCACHE"""

import http.client
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
TOKEN = "3f9a1c0e2b7d4c65a8e1f0b9d2c37e4f"
PATHS = ["/", "/stats", "/metrics", "/ring", "/ring?key=/a.jpg", "/health", "/nope"]


def ask(port, path, auth=None, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, headers={"Authorization": auth} if auth else {})
        r = c.getresponse()
        return r.status, r.getheader("WWW-Authenticate"), r.read().decode()
    finally:
        c.close()


def admin_port(proxy):
    m = proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10)
    if not m:
        raise RuntimeError("no admin listener line:\n" + proxy.log())
    return int(m.group(1))


def conf(cache, **proxy):
    return harness.conf_text([cache], proxy=dict({"admin_listen": "127.0.0.1:0"}, **proxy))


def tokens(cache):
    path = harness.write("auth.ini", conf(cache, admin_token=TOKEN))
    proxy = harness.Proxy(RP, path=path)
    port = admin_port(proxy)
    res = {p: ask(port, p) for p in PATHS}
    t.check(all(st == 401 for st, _, _ in res.values()),
            "no Authorization: 401 on every admin path", str({p: r[0] for p, r in res.items()}))
    st, www, body = res["/stats"]
    t.check(www == 'Bearer realm="ringproxy"' and "Authorization: Bearer" in body and "backends" not in body,
            "the 401 carries WWW-Authenticate: Bearer and says what to send, nothing of the stats",
            f"{www!r} {body!r}")
    st, www, body = ask(port, "/stats", "Bearer " + TOKEN[:-1] + "0")
    t.check(st == 401 and 'error="invalid_token"' in (www or ""), "a wrong token: 401, invalid_token",
            f"{st} {www}")
    for bad in ("Basic " + TOKEN, TOKEN, "Bearer", "Bearer " + TOKEN + "x", "Bearer " + TOKEN[:8]):
        st, _, _ = ask(port, "/stats", bad)
        t.check(st == 401, f"Authorization: {bad[:20]}...: 401", str(st))
    good = {p: ask(port, p, "Bearer " + TOKEN)[0] for p in PATHS}
    t.check(good == {"/": 200, "/stats": 200, "/metrics": 200, "/ring": 200, "/ring?key=/a.jpg": 200,
                     "/health": 200, "/nope": 404},
            "the right token: every path answers as without a token", str(good))
    st, _, _ = ask(port, "/stats", "bearer  " + TOKEN)
    t.check(st == 200, "the scheme is case-insensitive (RFC 9110 11.1)", str(st))
    st, www, _ = ask(port, "/stats", method="POST")
    t.check(st == 401, "a POST without a token: 401 before 405", str(st))
    st, _, _ = ask(port, "/stats", "Bearer " + TOKEN, method="POST")
    t.check(st == 405, "a POST with the token: 405 (read-only)", str(st))
    # a reload with another token: the old one stops working
    harness.write("auth.ini", conf(cache, admin_token="second-token_0123"))
    proxy.reload()
    t.check(ask(port, "/stats", "Bearer " + TOKEN)[0] == 401 and
            ask(port, "/stats", "Bearer second-token_0123")[0] == 200,
            "after a reload, the new token and only it")
    harness.write("auth.ini", conf(cache))
    proxy.reload()
    t.check(ask(port, "/stats")[0] == 200, "a reload that removes the token (loopback): open again")
    proxy.stop()


def run(args):
    p = subprocess.run([RP] + args, capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout + p.stderr


def refusals(cache):
    for addr in ("0.0.0.0:0", "[::]:0", "10.11.12.13:0"):
        path = harness.write("open.ini", conf(cache, admin_listen=addr))
        rc, out = run(["-t", "-c", path])
        want = f"admin_listen {addr} is not a loopback address and no admin_token is set"
        t.check(rc == 1 and want in out and "set [proxy] admin_token" in out and
                re.search(r"open\.ini:\d+: admin_listen", out),
                f"-t: admin_listen = {addr} without a token is refused, saying why and where", out)
        rc, out = run(["-c", path])
        t.check(rc == 1 and want in out and "nothing started" in out,
                f"start: admin_listen = {addr} without a token is refused", out)
    path = harness.write("open.ini", conf(cache, admin_listen="0.0.0.0:0", admin_token=TOKEN))
    rc, out = run(["-t", "-c", path])
    t.check(rc == 0, "-t: a non-loopback admin_listen with a token is accepted", out)
    path = harness.write("open.ini", conf(cache, admin_listen="[::1]:0"))
    rc, out = run(["-t", "-c", path])
    t.check(rc == 0, "-t: [::1] needs no token", out)
    path = harness.write("open.ini", conf(cache, admin_token="has space"))
    rc, out = run(["-t", "-c", path])
    t.check(rc == 1 and "admin_token: a token is letters, digits" in out,
            "a token with characters Authorization: Bearer cannot carry is refused", out)


def main():
    cache = harness.Cache(TC, "cache-1")
    tokens(cache)
    refusals(cache)


harness.run_main(t, main)
