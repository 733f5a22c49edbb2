#!/usr/bin/env python3
"""test_resolve.py -- a backend whose host name does not resolve does not
stop the start or a reload: the proxy starts with a warning naming the
file and line, the backend keeps its ring points and is down (its keys go
to the next backends on the ring), and its name is looked up again every
health interval. A name that starts resolving later (made testable
without a network by a private mount namespace whose /etc/hosts the test
rewrites: root, or user namespaces) brings the backend back, with active
checks and with passive checks only.
usage: test_resolve.py RINGPROXY TESTCACHE"""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
KEYS = [f"/thumbs/{i}_200x200.jpg" for i in range(300)]


def owners(port, keys):
    """{key: backend} through the proxy."""
    return H.backends_of(port, keys, time.monotonic() + 30)


def stats(admin_port):
    """The admin /stats document."""
    st, _, body = H.get(admin_port, "/stats")
    return json.loads(body) if st == 200 else {}




def expected_without(ring, down, keys):
    """{key: backend} when the backends in down are skipped by the walk."""
    return {k: next(n for n in ring.walk(k.encode()) if n not in down) for k in keys}


def namespace_wrap():
    """A command prefix that runs a program in a private mount namespace
    with HOSTS bind-mounted on /etc/hosts, and the hosts file; None when
    this machine cannot do it (then the late-resolving name is skipped)."""
    hosts = H.tmp_path("hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n")
    script = f'mount --bind "{hosts}" /etc/hosts && exec "$@"'
    for pre in (["unshare", "--mount", "--propagation", "private"],
                ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]):
        try:
            p = subprocess.run([*pre, "sh", "-c", script, "sh", "getent", "hosts", "localhost"],
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            return [*pre, "sh", "-c", script, "sh"], hosts
    return None, hosts


def late_name(wrap, hosts, caches, health):
    """A backend 'late' at late-cache.test, unknown to /etc/hosts at start,
    known after the test writes it there: down first, then back. health:
    the [health] keys (active checks or passive only)."""
    kind = "active checks" if health.get("path") else "passive checks only"
    with open(hosts, "w") as f:     # in place: the bind mount keeps the inode
        f.write("127.0.0.1 localhost\n")
    late = H.Cache(TC, "late")
    text = H.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0", "log_level": "debug"},
                       ring={"balance_factor": 0}, health=health)
    text += f"\n[backend late]\nurl = http://late-cache.test:{late.port}\n"
    path = H.write(f"late-{len(health)}.ini", text)
    ring = ringref.ring_of(path)
    px = H.Proxy(RP, tag="late", path=path, wrap=wrap)
    got = owners(px.port, KEYS)
    t.check(got == expected_without(ring, {"late"}, KEYS) and
            re.search(r"warn: .*:\d+: backend late: cannot resolve 'late-cache\.test'", px.log()),
            f"{kind}: late-cache.test unknown at start: the proxy serves, its keys go on along the ring")
    since = px.log_size()
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n127.0.0.1 late-cache.test\n")
    m = px.wait_log(r"backend late: 'late-cache\.test' resolves now, to 127\.0\.0\.1:(\d+)", timeout=10,
                    since=since)
    t.check(m and int(m.group(1)) == late.port, f"{kind}: the name is resolved again and found",
            px.log()[-2000:])
    want = {k: ring.lookup(k.encode()) for k in KEYS}

    def back():
        return owners(px.port, KEYS) == want
    t.check(H.wait_until(back, 15, step=0.2), f"{kind}: its keys come back to it")
    px.stop()
    late.stop()


def main():
    caches = [H.Cache(TC, f"c{i}") for i in (1, 2)]

    # ---- a name under .invalid (RFC 6761: never resolves, no network) ----
    text = H.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0", "log_level": "debug"},
                       ring={"balance_factor": 0}, health={"interval": "300ms"})
    text += "\n[backend gone]\nurl = http://cache-gone.invalid:6081\n"
    path = H.write("gone.ini", text)
    lines = text.splitlines()
    url_line = max(i for i, l in enumerate(lines) if "cache-gone" in l) + 1
    ring = ringref.ring_of(path)
    t0 = time.monotonic()
    px = H.Proxy(RP, tag="gone", path=path)
    started = time.monotonic() - t0
    ap = px.admin_port()
    t.check(re.search(re.escape(path) + f":{url_line}: backend gone: cannot resolve 'cache-gone\\.invalid': "
                      r"[^;]+; it is down, and its name is resolved again every 0\.3s", px.log()),
            "start: a warning names the file, the line and the interval", px.log())
    t.check(started < 10, f"the proxy started ({started:.1f}s)")
    got = owners(px.port, KEYS)
    want = expected_without(ring, {"gone"}, KEYS)
    t.check(got == want, "every key is served; gone's keys go to the next backend on the ring",
            {k: (got.get(k), want[k]) for k in KEYS if got.get(k) != want[k]})
    owned = sum(1 for k in KEYS if ring.lookup(k.encode()) == "gone")
    t.check(owned > 0, f"gone owns {owned} of the keys (the ring keeps its points)")
    doc = stats(ap)
    be = {b["name"]: b for b in doc.get("backends", [])}
    t.check(be.get("gone", {}).get("up") in (0, False) and be["gone"].get("points") == 160,
            "/stats: gone is down with its 160 points", be.get("gone"))

    # looked up again every interval (300 ms): several tries in 1.5 s
    since = px.log_size()
    time.sleep(1.5)
    tries = len(re.findall(r"backend gone: 'cache-gone\.invalid' still does not resolve",
                           px.log()[since:]))
    t.check(3 <= tries <= 7, f"its name is looked up again every interval ({tries} tries in 1.5 s)")

    # a reload with the name still unresolvable: done, not refused
    r = px.reload()
    t.check(r and r.startswith("reload 2:"), f"a reload is not refused for it: {r}")
    got = owners(px.port, KEYS)
    t.check(got == want, "after the reload every key is still served the same way")
    t.check(px.stop() == 0, "it stops cleanly with a lookup running")

    # ---- a name that starts resolving later ------------------------------
    wrap, hosts = namespace_wrap()
    if wrap is None:
        for what in ("active checks", "passive checks only"):
            t.skip(f"{what}: a name that resolves later",
                   "no private mount namespace here (unshare needs root or user namespaces)")
        return
    late_name(wrap, hosts, caches, {"path": "/__health", "interval": "300ms", "rise": 1})
    late_name(wrap, hosts, caches, {"interval": "300ms", "backoff": "200ms"})


H.run_main(t, main)
