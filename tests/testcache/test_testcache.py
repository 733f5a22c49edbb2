#!/usr/bin/env python3
"""Smoke test of tests/testcache: every knob a later e2e test relies on.

Usage: test_testcache.py PATH/TO/testcache
Starts two servers on 127.0.0.1 port 0 and talks to them with http.client and
raw sockets (standard library only).  Exits 0 when every check passed.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

EXE = sys.argv[1]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def body_for(uri, size):
    """The documented body formula: (URI + "\\n") repeated, cut to size."""
    pattern = (uri + "\n").encode()
    return (pattern * (size // len(pattern) + 1))[:size]


def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return "%08x" % h


def start(tmp, name, *extra):
    port_file = os.path.join(tmp, name + ".port")
    proc = subprocess.Popen([EXE, "--listen", "127.0.0.1:0", "--name", name,
                             "--port-file", port_file, *extra],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    deadline = time.time() + 10
    while not os.path.exists(port_file) and time.time() < deadline:
        time.sleep(0.01)
    with open(port_file) as f:
        port = int(f.read())
    check(line == "listening on 127.0.0.1:%d" % port,
          "%s prints its port (%r)" % (name, line))
    return proc, port


def stop(proc, name):
    proc.terminate()
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    check(rc == 0, "%s exits 0 on SIGTERM (rc=%s)" % (name, rc))


def request(port, path, method="GET", body=None, headers=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r, data


def stats(port):
    return json.loads(request(port, "/__stats")[1])


def raw(port, data, limit=1 << 16):
    """Send data on a fresh socket; return everything read until close."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    out = b""
    while len(out) < limit:
        got = s.recv(65536)
        if not got:
            break
        out += got
    s.close()
    return out


def wait_idle(port, what):
    deadline = time.time() + 5
    st = stats(port)
    while st["inflight"] != 0 and time.time() < deadline:
        time.sleep(0.05)
        st = stats(port)
    check(st["inflight"] == 0, what + " (inflight=%d)" % st["inflight"])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        p1, port1 = start(tmp, "alpha")
        p2, port2 = start(tmp, "beta", "--health-status", "503",
                          "--size", "100", "--count-prefix", "/z/")
        p3, port3 = start(tmp, "gamma", "--threads", "3")
        try:
            run(port1, port2)
            run_threads(port3)
        finally:
            stop(p3, "gamma")
            # a reply still waiting at exit must not leak or crash
            s = socket.create_connection(("127.0.0.1", port2))
            s.sendall(b"GET /late?delay=10000 HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.2)
            stop(p1, "alpha")
            stop(p2, "beta")
            s.close()


def run(port1, port2):
    # deterministic body, the same on every backend
    uri = "/thumbs/a.jpg"
    r1, b1 = request(port1, uri)
    r2, b2 = request(port2, uri + "?size=4096")
    check(r1.status == 200 and b1 == body_for(uri, 4096),
          "default body is 4096 bytes of the URI pattern")
    check(r1.getheader("X-Backend") == "alpha" and
          r2.getheader("X-Backend") == "beta", "X-Backend names the server")
    ra, ba = request(port1, uri + "?size=4096")
    check(ba == b2 and ba == body_for(uri + "?size=4096", 4096),
          "same URL gives the same body on another backend")
    check(r1.getheader("Content-Type") == "image/jpeg" and
          r1.getheader("Cache-Control") == "public, max-age=3600",
          "Content-Type and default Cache-Control")
    check(len(request(port2, "/d")[1]) == 100, "--size sets the default")

    for size in (0, 1, 65536, 65537, 100000, 3 * 1024 * 1024 + 7):
        path = "/s/x.jpg?size=%d" % size
        r, b = request(port1, path)
        check(r.status == 200 and b == body_for(path, size) and
              r.getheader("Content-Length") == str(size),
              "size=%d body and Content-Length" % size)
    path = "/big?size=52428800"
    r, b = request(port1, path)
    check(b == body_for(path, 52428800), "50 MB body streams intact")

    r, b = request(port1, "/e?status=500")
    check(r.status == 500 and b == body_for("/e?status=500", 4096),
          "status knob keeps the body")
    r, b = request(port1, "/e?status=204")
    check(r.status == 204 and b == b"", "204 has no body")
    r, b = request(port1, "/c?cc=max-age%3D60")
    check(r.getheader("Cache-Control") == "max-age=60", "cc knob (escaped)")
    r, b = request(port1, "/c?cc=max-age=60")
    check(r.getheader("Cache-Control") == "max-age=60", "cc knob (plain)")
    r, b = request(port1, "/c?size=oops")
    check(r.status == 400, "bad knob value gives 400")

    # chunked: http.client decodes it; the raw bytes show the framing
    for size in (4096, 1000000):
        path = "/ch?chunked=1&size=%d" % size
        r, b = request(port1, path)
        check(r.getheader("Transfer-Encoding") == "chunked" and
              b == body_for(path, size), "chunked size=%d" % size)
    head = raw(port1, b"GET /ch?chunked=1 HTTP/1.1\r\nHost: x\r\n"
               b"Connection: close\r\n\r\n")
    check(head.count(b"\r\n400\r\n") == 4 and head.endswith(b"\r\n0\r\n\r\n"),
          "4 KiB chunked body goes out as 4 chunks")

    # HEAD
    r, b = request(port1, "/h.jpg", method="HEAD")
    check(r.status == 200 and b == b"" and
          r.getheader("Content-Length") == "4096", "HEAD: length, no body")

    # POST / PUT echo
    payload = os.urandom(200000)
    r, b = request(port1, "/up?status=201", method="POST", body=payload)
    check(r.status == 201 and b == payload and
          r.getheader("X-Body-Length") == str(len(payload)) and
          r.getheader("X-Body-Sum") == fnv1a(payload),
          "POST echoes the body with X-Body-Length and X-Body-Sum")
    r, b = request(port1, "/up", method="PUT", body=b"abc")
    check(b == b"abc" and r.getheader("X-Body-Sum") == fnv1a(b"abc"),
          "PUT echoes the body")
    r, b = request(port1, "/up?chunked=1", method="POST", body=payload)
    check(b == payload, "POST echo with chunked reply")

    # header echo
    r, b = request(port1, "/hdr", headers={
        "X-Forwarded-For": "10.0.0.1", "Via": "1.1 proxy",
        "X-Hop-Test": "yes", "X-Other": "no"})
    check(r.getheader("X-Echo-X-Forwarded-For") == "10.0.0.1" and
          r.getheader("X-Echo-Via") == "1.1 proxy" and
          r.getheader("X-Echo-X-Hop-Test") == "yes" and
          r.getheader("X-Echo-X-Other") is None and
          r.getheader("X-Echo-Version") == "1.1" and
          r.getheader("X-Echo-Host") == "127.0.0.1:%d" % port1,
          "selected request headers echoed as X-Echo-*")

    # delay: measured, and concurrent delays overlap
    t0 = time.time()
    request(port1, "/slow?delay=300")
    check(time.time() - t0 >= 0.3, "delay=300 waits at least 300 ms")
    request(port1, "/__reset")
    threads = [threading.Thread(target=request,
                                args=(port1, "/slow%d?delay=500" % i))
               for i in range(8)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    st = stats(port1)
    check(elapsed < 1.5, "8 delayed requests overlap (%.2fs)" % elapsed)
    check(st["max_inflight"] == 8 and st["inflight"] == 0,
          "max_inflight counts concurrent requests (%s)" % st)

    # drop and wrong length
    try:
        request(port1, "/gone?drop=1")
        check(False, "drop closes without a response")
    except http.client.RemoteDisconnected:
        check(True, "drop closes without a response")
    check(raw(port1, b"GET /gone?drop=1&delay=100 HTTP/1.1\r\nHost: x\r\n\r\n")
          == b"", "delayed drop sends no bytes")
    for size in (10, 200000):
        try:
            request(port1, "/short?wronglen=1&size=%d" % size)
            check(False, "wronglen size=%d" % size)
        except http.client.IncompleteRead as e:
            check(len(e.partial) == size, "wronglen size=%d: short body" % size)

    # clients that leave early do not leave requests behind
    s = socket.create_connection(("127.0.0.1", port1))
    s.sendall(b"GET /wait?delay=1500 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.1)
    s.close()
    s = socket.create_connection(("127.0.0.1", port1))
    s.sendall(b"GET /huge?size=500000000 HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(1000)
    s.close()
    wait_idle(port1, "abandoned delayed and streamed replies are freed")

    # keep-alive: 2 requests on one connection, /__stats is not counted
    request(port1, "/__reset")
    c = http.client.HTTPConnection("127.0.0.1", port1, timeout=10)
    r, _ = request(port1, "/k1", conn=c)
    r, _ = request(port1, "/k2", conn=c)
    check(r.getheader("X-Request-Count") == "2", "X-Request-Count runs on")
    st = json.loads(request(port1, "/__stats", conn=c)[1])
    c.close()
    check(st["name"] == "alpha" and st["requests"] == 2 and
          st["connections"] == 1,
          "keep-alive: 2 requests on 1 connection (%s)" % st)
    st = stats(port1)
    check(st["requests"] == 2 and st["connections"] == 2,
          "admin requests not counted, connections are (%s)" % st)
    request(port2, "/__reset")
    for path in ("/z/1.jpg", "/y/2.jpg", "/z/3.jpg?size=5"):
        request(port2, path)
    st = stats(port2)
    check(st["requests"] == 3 and st["prefix_requests"] == 2 and
          stats(port1)["prefix_requests"] == 0,
          "--count-prefix /z/: requests whose target starts with it (%s)" % st)
    ser = json.loads(request(port2, "/__series")[1])
    now_ms = time.clock_gettime(time.CLOCK_MONOTONIC) * 1000
    check(ser["slot_ms"] == 100 and 0 < now_ms - ser["start_ms"] < 600000 and
          sum(ser["requests"]) >= 3 and sum(ser["prefix_requests"]) == 2 and
          sum(ser["prefix_requests"][-20:]) == 2 and
          abs(len(ser["requests"]) - (now_ms - ser["start_ms"]) / 100) < 2,
          "/__series: requests per 100 ms of CLOCK_MONOTONIC since the start (%d slots)"
          % len(ser["requests"]))

    # health and runtime settings
    r, b = request(port1, "/__health")
    check(r.status == 200 and b == b"ok\n", "/__health is 200 ok")
    r, b = request(port2, "/__health")
    check(r.status == 503, "--health-status 503")
    request(port1, "/__set?health=500")
    r, b = request(port1, "/__health")
    r2, _ = request(port1, "/still/works")
    check(r.status == 500 and r2.status == 200,
          "/__set?health=500 fails the health check only")
    request(port1, "/__set?health=200&status=503&size=10")
    r, b = request(port1, "/def")
    check(r.status == 503 and len(b) == 10, "/__set changes the defaults")
    request(port1, "/__set?status=200&size=4096")
    check(request(port1, "/__health")[0].status == 200, "health back to 200")


def run_threads(port):
    """--threads 3: three loops on one port share counters and settings."""
    request(port, "/__set?delay=50")
    bad = []

    def client(i):
        for j in range(10):
            path = "/t/%d/%d.jpg" % (i, j)
            r, b = request(port, path)
            if r.status != 200 or b != body_for(path, 4096):
                bad.append(path)

    request(port, "/__reset")
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st = stats(port)
    check(not bad, "--threads 3: 80 correct bodies (%d bad)" % len(bad))
    check(st["requests"] == 80 and st["connections"] == 81 and
          st["inflight"] == 0 and st["max_inflight"] >= 2,
          "--threads 3: counters add up across loops (%s)" % st)


main()
if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("all checks passed")
