#!/usr/bin/env python3
"""haproxy-vectors.py -- make haproxy-uri.txt, the HAProxy vectors of
test-scheme, from the real HAProxy: five testcaches on 127.0.0.1 behind
`balance uri` + `hash-type consistent` (mixed weights, one explicit id, the
others numbered by HAProxy), in three listeners (the default, `whole`,
`path-only`), then several hundred request targets, each with the cache its
X-Backend header names.

Usage: tests/unit/scheme/haproxy-vectors.py TESTCACHE [HAPROXY] > haproxy-uri.txt
(TESTCACHE: build/tests/testcache/testcache). Standard library only; the
processes it starts are stopped by PID at the end."""

import http.client
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

# name, id ("" = HAProxy's automatic number), weight
SERVERS = [("c1", "", 1), ("c2", "3", 2), ("c3", "", 3), ("c4", "", 1), ("c5", "", 4)]
MODES = [("uri", ""), ("uri+query", " whole"), ("path", " path-only")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, deadline):
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def targets(rng):
    """Origin-form targets with and without queries, %-escapes and odd
    bytes a client may send, and absolute-form ones (where uri and path
    differ)."""
    # no ';': ringproxy refuses a dot-segment a path parameter delimits
    # (http1_path_dots), so such targets place nothing to compare
    alpha = "abcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,=:@%"
    out = ["/", "/a", "/a?", "/a?b", "/?x=1", "/thumbs/1.jpg", "/thumbs/1.jpg?w=100&h=50",
           "/%41%42", "/a%2Fb", "/a/b/c/d/e/f/g", "/x?y?z"]
    while len(out) < 400:
        depth = rng.randint(1, 4)
        path = "".join("/" + "".join(rng.choice(alpha[:-1]) for _ in range(rng.randint(1, 12)))
                       for _ in range(depth))
        if rng.random() < 0.2:
            path += "/%%%02X" % rng.randint(0, 255)
        if rng.random() < 0.5:
            path += "?" + "&".join("%s=%d" % (rng.choice("abcdwh"), rng.randint(0, 999))
                                   for _ in range(rng.randint(0, 3)))
        out.append(path)
    for p in out[:100]:
        out.append("http://thumbs.example" + p)
    return out


def main():
    testcache = sys.argv[1]
    haproxy = sys.argv[2] if len(sys.argv) > 2 else "haproxy"
    procs = []
    tmp = tempfile.mkdtemp(prefix="haproxy-vectors.")
    try:
        ports = []
        for name, _, _ in SERVERS:
            pf = os.path.join(tmp, name + ".port")
            procs.append(subprocess.Popen([testcache, "--listen", "127.0.0.1:0", "--name", name,
                                           "--port-file", pf], stdout=subprocess.DEVNULL))
            deadline = time.monotonic() + 20
            while not os.path.exists(pf) and time.monotonic() < deadline:
                time.sleep(0.01)
            with open(pf) as f:
                ports.append(int(f.read()))
        cfg = ["global", "  maxconn 200", "defaults", "  mode http", "  timeout connect 5s",
               "  timeout client 30s", "  timeout server 30s"]
        lports = []
        for mode, arg in MODES:
            lports.append(free_port())
            cfg += ["listen " + mode.replace("+", "-"), "  bind 127.0.0.1:%d" % lports[-1],
                    "  balance uri" + arg, "  hash-type consistent"]
            for (name, sid, w), port in zip(SERVERS, ports):
                cfg.append("  server %s 127.0.0.1:%d weight %d%s" % (name, port, w,
                                                                  " id " + sid if sid else ""))
        path = os.path.join(tmp, "haproxy.cfg")
        with open(path, "w") as f:
            f.write("\n".join(cfg) + "\n")
        procs.append(subprocess.Popen([haproxy, "-db", "-f", path], stdout=subprocess.DEVNULL))
        deadline = time.monotonic() + 20
        if not all(wait_port(p, deadline) for p in lports):
            sys.exit("haproxy did not start")
        version = subprocess.run([haproxy, "-v"], capture_output=True, text=True).stdout.split(" - ")[0]
        print("# HAProxy placement vectors for test-scheme, made by tests/unit/scheme/haproxy-vectors.py")
        print("# against the real %s on 127.0.0.1." % version)
        print("# Each line MODE TARGET BACKEND is a")
        print("# request sent with that target to a `balance uri` + `hash-type consistent`")
        print("# listener (uri: balance uri; uri+query: balance uri whole; path: balance uri")
        print("# path-only) and the testcache that answered it (its X-Backend header).")
        print("# server NAME ID WEIGHT: the backends, in the config's order (ID - = numbered")
        print("# by HAProxy).")
        for name, sid, w in SERVERS:
            print("server %s %s %d" % (name, sid or "-", w))
        rng = random.Random(23)
        for (mode, _), lport in zip(MODES, lports):
            for t in targets(rng):
                # one connection a request: HAProxy may close an idle one
                c = http.client.HTTPConnection("127.0.0.1", lport, timeout=30)
                c.putrequest("GET", t, skip_host=True, skip_accept_encoding=True)
                c.putheader("Host", "thumbs.example")
                c.endheaders()
                r = c.getresponse()
                r.read()
                c.close()
                print(mode, t, r.getheader("X-Backend"))
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)


main()
