#!/usr/bin/env python3
"""test_admin.py -- the admin listener ([proxy] admin_listen): /stats
(JSON), /metrics (Prometheus), / (HTML), /ring, /health, as an operator
and a scraper read them: counts that match the traffic sent, shares that
match the independent ring model, the last reload's outcome.
usage: test_admin.py RINGPROXY TESTCACHE"""

import http.client
import json
import os
import re
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import ringref  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()




def fetch(port, path, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read().decode()
    finally:
        c.close()


def status_of(sock, timeout):
    """The status code of the first response line on sock, or None when
    none comes within timeout s (or the connection ends without one)."""
    sock.settimeout(timeout)
    buf = b""
    try:
        while b"\r\n" not in buf:
            d = sock.recv(4096)
            if not d:
                break
            buf += d
    except OSError:
        pass
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", buf)
    return int(m.group(1)) if m else None


def push(sock, chunk, count, seconds):
    """Send chunk count times, for at most seconds; the bytes the kernel
    took before the peer stopped reading or closed."""
    sent = 0
    deadline = time.monotonic() + seconds
    sock.settimeout(1)
    try:
        for _ in range(count):
            if time.monotonic() > deadline:
                break
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    return sent


def limits(proxy, port):
    """Issue 9, finding 3: what a client can make the admin listener hold."""
    for path in ("/", "/stats", "/metrics", "/ring", "/health"):
        for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request(method, path)
            r = c.getresponse()
            r.read()
            c.close()
            if r.status != 405 or r.getheader("Allow") != "GET, HEAD":
                break
        t.check(r.status == 405 and r.getheader("Allow") == "GET, HEAD",
                f"{path}: every method but GET and HEAD is 405 with Allow: GET, HEAD",
                [method, r.status, r.getheader("Allow")])
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("HEAD", "/stats")
    r = c.getresponse()
    t.check(r.status == 200 and r.read() == b"", "HEAD /stats: 200 without a body")
    c.close()

    # POST /stats announcing 1 GiB, then 96 MiB sent: refused from the
    # Content-Length, nothing of the body kept
    rss0 = proxy.rss_kb()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /stats HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 1073741824\r\n\r\n" % port)
    st = status_of(s, 5)
    sent = push(s, b"x" * (1 << 20), 96, 20)
    s.close()
    grew = proxy.rss_kb() - rss0
    t.check(st == 413, "POST with Content-Length: 1073741824: 413 before the body is read", st)
    t.check(grew < 16 * 1024, f"... and 96 MiB sent after it ({sent >> 20} MiB taken by the kernel) "
            f"grew the RSS by {grew} kB, under 16 MiB", grew)

    # 6,000 header lines of 8 KB: refused at the head limit
    rss0 = proxy.rss_kb()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
    sent = push(s, b"X-Flood: " + b"a" * 8000 + b"\r\n", 6000, 20)
    push(s, b"\r\n", 1, 1)
    st = status_of(s, 5)
    s.close()
    grew = proxy.rss_kb() - rss0
    t.check(st in (400, 431, None) and sent < 6000 * 8011,
            f"6,000 header lines of 8 KB: refused after {sent >> 10} kB", [st, sent])
    t.check(grew < 16 * 1024, f"... and the RSS grew by {grew} kB, under 16 MiB", grew)

    # at most 64 connections: the next waits in the kernel's backlog
    # until one of them closes
    time.sleep(0.5)     # the connections above are closed and counted out
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(64)]
    try:
        held[0].sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
        first = status_of(held[0], 5)
        extra = socket.create_connection(("127.0.0.1", port), timeout=10)
        extra.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
        waiting = status_of(extra, 1.5)
        held[1].close()
        later = status_of(extra, 5)
        extra.close()
        t.check(first == 200 and waiting is None and later == 200,
                "64 admin connections open: a 65th is served only once one of them closes",
                [first, waiting, later])
    finally:
        for h in held:
            h.close()
    st = harness.wait_until(lambda: fetch(port, "/health")[0] == 200, 5)
    t.check(st, "with them closed, the admin listener serves again")


def send(port, head):
    """One raw request (head: its lines after the request line's, without
    the blank line; Connection: close is added): (status, body text)."""
    (r,), rd = harness.raw(port, head.encode() + b"Connection: close\r\n\r\n")
    rd.s.close()
    return r.status, r.body.decode("utf-8", "replace")


def purged(answer):
    """Whether (status, body) is the purge's own answer, not a refusal."""
    st, body = answer
    return st in (200, 502) and '"result"' in body


def cross_site(proxy, port):
    """Issue 22, finding 9: a web page's form post to POST /purge, and DNS
    rebinding (a name of the attacker's pointing at 127.0.0.1) to read the
    listener without a token."""
    host = f"127.0.0.1:{port}"
    form = (f"POST /purge?url=http://h.example/a.jpg HTTP/1.1\r\nHost: {host}\r\n"
            "Origin: http://attacker.example\r\nSec-Fetch-Site: cross-site\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\n")
    mark = proxy.log_size()
    st, body = send(port, form)
    t.check(st == 403 and "cross-site request is refused" in body,
            "a web page's form post to POST /purge (Origin, Sec-Fetch-Site: cross-site, a form's type): 403",
            [st, body])
    purge = f"POST /purge?url=http://h.example/a.jpg HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n"
    firefox = "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Firefox/115.0\r\n"
    refused = {"Sec-Fetch-Site: cross-site": "Sec-Fetch-Site: cross-site\r\n",
               "Sec-Fetch-Site: same-site (another port of localhost)": "Sec-Fetch-Site: same-site\r\n",
               "Origin: http://attacker.example alone": "Origin: http://attacker.example\r\n",
               "Origin: null": "Origin: null\r\n",
               f"Origin: http://localhost:{port} for Host {host}": f"Origin: http://localhost:{port}\r\n",
               "a browser's form type without Origin or Sec-Fetch-Site":
                   firefox + "Content-Type: application/x-www-form-urlencoded\r\n",
               "text/plain from a browser": firefox + "Content-Type: text/plain;charset=UTF-8\r\n",
               "multipart/form-data from a browser": firefox + "Content-Type: multipart/form-data; boundary=x\r\n"}
    got = {what: send(port, purge + extra)[0] for what, extra in refused.items()}
    t.check(all(v == 403 for v in got.values()), "each cross-site sign alone: 403", got)
    t.check(not re.search(r"info: purge ", proxy.log()[mark:]), "... and no purge was made",
            proxy.log()[mark:][-1500:])
    allowed = {"same-origin (Sec-Fetch-Site, Origin = the listener)":
                   f"Origin: http://{host}\r\nSec-Fetch-Site: same-origin\r\n",
               "no browser headers (curl -X POST)": "User-Agent: curl/7.88.1\r\n",
               "a program's form type (curl -d '', libcurl)": "Content-Type: application/x-www-form-urlencoded\r\n"}
    # served: the purge's own JSON (the test cache answers PURGE 405, as
    # evhttp 2.1 knows no PURGE, so the purge itself reports 502 "failed")
    got = {what: purged(send(port, purge + extra)) for what, extra in allowed.items()}
    t.check(all(got.values()), "a same-origin request and programs still purge: served", got)

    for path in ("/", "/stats", "/metrics", "/ring", "/health", "/nope"):
        st, body = send(port, f"GET {path} HTTP/1.1\r\nHost: rebound.attacker.example\r\n")
        t.check(st == 421 and "Host: rebound.attacker.example does not name this admin listener" in body and
                f"127.0.0.1:{port}, localhost:{port} or [::1]:{port} only" in body and "backends" not in body,
                f"DNS rebinding: GET {path} with Host: rebound.attacker.example: 421, saying why", [st, body])
    st, body = send(port, "POST /purge?url=http://h.example/a.jpg HTTP/1.1\r\nHost: rebound.attacker.example\r\n"
                    "Content-Length: 0\r\n")
    t.check(st == 421, "... and POST /purge with it: 421", [st, body])
    got = {h: send(port, f"GET /stats HTTP/1.1\r\nHost: {h}\r\n")[0]
           for h in ("127.0.0.1", f"127.0.0.1:{port + 1 if port < 65535 else 1}", f"rebound.attacker.example:{port}",
                     f"localhost.attacker.example:{port}", f"127.0.0.2:{port}")}
    t.check(all(v == 421 for v in got.values()), "other names, ports or addresses: 421", got)
    got = {h: send(port, f"GET /stats HTTP/1.1\r\nHost: {h}\r\n")[0]
           for h in (host, f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}")}
    t.check(all(v == 200 for v in got.values()), "the listener's own names: 200", got)
    st, _ = send(port, "GET /stats HTTP/1.0\r\n")
    t.check(st == 200, "HTTP/1.0 without Host (no browser sends that): 200", st)
    got = send(port, purge + f"Origin: https://{host}\r\n")
    t.check(purged(got), "an Origin naming the Host under https (a TLS proxy in front): served", got)

    # a listener on another loopback address is named by it too
    other = harness.Proxy(RP, harness.conf_text([caches[0]], proxy={"admin_listen": "127.0.0.2:0"}), "admin-2")
    m = other.wait_log(r"stats on http://127\.0\.0\.2:(\d+)/", 10)
    p2 = int(m.group(1))

    def on_other(host_line):
        s2 = socket.create_connection(("127.0.0.2", p2), timeout=10)
        s2.sendall(b"GET /stats HTTP/1.1\r\n" + host_line + b"\r\nConnection: close\r\n\r\n")
        r = harness.Reader(s2).response()
        s2.close()
        return r
    r = on_other(b"Host: 127.0.0.2:%d" % p2)
    r2 = on_other(b"Host: evil.example")
    t.check(r.status == 200 and r2.status == 421 and b"127.0.0.2:%d" % p2 in r2.body,
            "admin_listen = 127.0.0.2:0: Host 127.0.0.2:PORT is served, another name gets 421 naming it",
            [r.status, r2.status, r2.body])
    other.stop()


names = ("a1", "a2", "a3")
caches = [harness.Cache(TC, n) for n in names]
try:
    text = harness.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0", "connect_timeout": "300ms"},
                             ring={"balance_factor": 0}, health={"fall": 1, "backoff": "30s"})
    proxy = harness.Proxy(RP, text, "admin")
    A = proxy.admin_port()
    ring = ringref.Ring([(n, 1.0) for n in names], 160)

    # traffic with a known spread
    sent = {n: 0 for n in names}
    conn = proxy.http()
    for i in range(60):
        path = f"/thumbs/{i}.jpg"
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        sent[r.getheader("X-Ringproxy-Backend")] += 1
    conn.close()
    t.check(all(sent[n] == sum(1 for i in range(60) if ring.lookup(f"/thumbs/{i}.jpg".encode()) == n)
                for n in names), "the traffic went where the ring model says", sent)

    st, ctype, body = fetch(A, "/stats")
    doc = json.loads(body)
    t.check(st == 200 and ctype.startswith("application/json"), "/stats: 200 JSON")
    by = {b["name"]: b for b in doc["backends"]}
    t.check({n: by[n]["requests"] for n in names} == sent, "/stats: requests per backend = what was sent",
            {n: by[n]["requests"] for n in names})
    t.check({n: by[n]["responses"] for n in names} == sent, "/stats: responses per backend = what was sent")
    t.check(doc["accepted"] >= 1 and doc["generation"] == 1 and doc["last_reload"] is None,
            "/stats: accepted connections, generation 1, no reload yet", doc)
    shares = ring.shares()
    t.check(all(abs(by[n]["share"] - shares[n]) < 1e-12 and by[n]["points"] == 160 for n in names),
            "/stats: exact shares and points, as the ring model computes them")
    t.check(all(by[n]["up"] is True and by[n]["inflight"] == 0 for n in names), "/stats: all up, nothing in flight")

    # Prometheus: every sample has HELP and TYPE; values agree with /stats
    st, ctype, body = fetch(A, "/metrics")
    t.check(st == 200 and ctype.startswith("text/plain"), "/metrics: 200 text/plain")
    helps = set(re.findall(r"^# HELP (\S+) ", body, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (counter|gauge|histogram)$", body, re.M))
    samples = re.findall(r"^([a-z_]+)(\{backend=\"[^\"]+\"\})? (\S+)$", body, re.M)

    def family(n):
        """A histogram's _sum and _count belong to its family."""
        base = re.sub(r"_(sum|count)$", "", n)
        return base if types.get(base) == "histogram" else n
    t.check(samples and all(family(n) in helps and family(n) in types for n, _, _ in samples),
            f"/metrics: each of {len(samples)} samples has # HELP and # TYPE")
    t.check(all(n.endswith("_total") == (types[n] == "counter") for n in types if types[n] != "histogram"),
            "/metrics: counters, and only counters, end in _total")
    got = {m.group(1): int(m.group(2)) for m in
           re.finditer(r'^ringproxy_backend_requests_total\{backend="([^"]+)"\} (\d+)$', body, re.M)}
    t.check(got == sent, "/metrics: ringproxy_backend_requests_total per backend = what was sent", got)

    st, ctype, body = fetch(A, "/")
    t.check(st == 200 and ctype.startswith("text/html") and "<table" in body and all(n in body for n in names),
            "/: an HTML page with a row per backend")
    st, ctype, body = fetch(A, "/ring")
    ringdoc = json.loads(body)
    t.check(st == 200 and abs(sum(b["share"] for b in ringdoc["backends"]) - 1) < 1e-12 and
            ringdoc["points"] == 480, "/ring: shares sum to 1 over 480 points")
    st, _, body = fetch(A, "/health")
    t.check(st == 200 and body.startswith("ok: 3 of 3"), "/health: 200 while backends are up", body)
    st, _, _ = fetch(A, "/nope")
    t.check(st == 404, "an unknown path is 404")
    st, _, _ = fetch(A, "/stats", "POST")
    t.check(st == 405, "the admin listener is read-only: POST is 405")
    limits(proxy, A)
    cross_site(proxy, A)

    # reloads: a failed one and a good one are both reported
    with open(proxy.conf, "a") as f:
        f.write("\n[backend broken\n")
    proxy.proc.send_signal(signal.SIGHUP)
    t.check(proxy.wait_log(r"reload failed") is not None, "a broken file: the reload fails")
    doc = json.loads(fetch(A, "/stats")[2])
    t.check(doc["last_reload"] and doc["last_reload"]["ok"] is False and "malformed section" in
            doc["last_reload"]["report"] and doc["reloads_failed"] == 1 and doc["generation"] == 1,
            "/stats: the failed reload, its error, generation still 1", doc["last_reload"])
    with open(proxy.conf, "w") as f:
        f.write(harness.conf_text(caches[:2], proxy={"admin_listen": "127.0.0.1:0", "connect_timeout": "300ms"},
                                  ring={"balance_factor": 0}, health={"fall": 1, "backoff": "30s"}))
    proxy.proc.send_signal(signal.SIGHUP)
    t.check(proxy.wait_log(r"reload 2: -a3") is not None, "a good reload removes a3")
    doc = json.loads(fetch(A, "/stats")[2])
    t.check(doc["generation"] == 2 and doc["last_reload"]["ok"] is True and
            doc["last_reload"]["report"].startswith("reload 2: -a3") and
            abs(doc["last_reload"]["moved_share"] - shares["a3"]) < 1e-12 and
            [b["name"] for b in doc["backends"]] == ["a1", "a2"],
            "/stats: generation 2, the report, the moved share = a3's share, two backends")
    t.check(all(b["requests"] == sent[b["name"]] for b in doc["backends"]),
            "counters survive the reload (state is per name)")

    # every backend down: /health answers 503
    for c in caches[:2]:
        c.stop()
    for i in range(6):
        try:
            proxy.get(f"/down/{i}")
        except OSError:
            pass
    st, _, body = fetch(A, "/health")
    t.check(st == 503 and body.startswith("unavailable: 0 of 2") and "1 failing" in body,
            "/health: 503 when every backend is down or failing", body)
    # passive checks keep the last backend up in service (health.c)
    doc = json.loads(fetch(A, "/stats")[2])
    states = sorted((b["state"], b["up"], b["transitions"] >= 1) for b in doc["backends"])
    t.check(states == [("down", False, True), ("failing", True, False)] and
            all(b["connect_errors"] >= 1 for b in doc["backends"]),
            "/stats: one down with its transition, the last one failing, the connect errors counted",
            doc["backends"])
    t.check(proxy.stop() == 0, "SIGTERM: exit 0")
finally:
    for c in caches:
        c.stop()
t.done()
