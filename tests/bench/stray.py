#!/usr/bin/env python3
"""tests/bench/stray.py -- how many clients get another request's body
from a backend that sends a second response nobody asked for after each
real one (a broken cache, a buggy origin behind it).

Usage (from the source tree):
  python3 tests/bench/stray.py RINGPROXY [N] [CLIENTS] [MODE] [RUNS]
    N [4000] keep-alive GETs in all, from CLIENTS [8] threads, each its
    own URL; the proxy (one worker, no cache, no retries) in front of one
    fake backend on 127.0.0.1. MODE says when the stray response comes:
      split   [default] written right after the real one (a second send)
      late    1 ms after it: usually after the next request went out
      joined  in the same send as the real one
    RUNS [1] runs, one line each, then the median share.

Prints, per run, the responses whose body is not their own URL's (the
stray ones, or a real one answering the wrong request) and how many
backend connections served them. Every load is bounded (socket timeouts,
N requests); the proxy is stopped by PID."""

import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

RP = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
CLIENTS = int(sys.argv[3]) if len(sys.argv) > 3 else 8
MODE = sys.argv[4] if len(sys.argv) > 4 else "split"
RUNS = int(sys.argv[5]) if len(sys.argv) > 5 else 1


def backend(s, conns):
    """Each request's own URL as its body, then a stray response."""
    buf = b""
    n = 0
    with conns[1]:
        conns[0] += 1
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            head, _, buf = buf.partition(b"\r\n\r\n")
            target = head.split(b" ")[1]
            n += 1
            junk = b"STRAY after " + target
            real = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(target), target)
            extra = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(junk), junk)
            if MODE == "joined":
                s.sendall(real + extra)
            else:
                s.sendall(real)
                if MODE == "late":
                    time.sleep(0.001)
                s.sendall(extra)
    except OSError:
        pass
    finally:
        s.close()


def run():
    conns = [0, threading.Lock()]
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)

    def accept():
        while True:
            try:
                s, _ = ls.accept()
            except OSError:
                return
            s.settimeout(30)
            threading.Thread(target=backend, args=(s, conns), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    d = tempfile.mkdtemp(prefix="stray-")
    conf, logp = os.path.join(d, "stray.ini"), os.path.join(d, "log")
    with open(conf, "w") as f:
        f.write("[proxy]\nlisten = 127.0.0.1:0\nworkers = 1\nretries = 0\nmax_connections = 1000\n"
                "[health]\npassive = off\n[cache]\nsize = 0\n"
                f"[backend b1]\nurl = http://127.0.0.1:{ls.getsockname()[1]}\n")
    with open(logp, "wb") as log:
        p = subprocess.Popen([RP, "-c", conf], stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)
    port = None
    for _ in range(200):
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(logp).read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.05)
    wrong, total, errors = [0], [0], [0]
    lock = threading.Lock()

    def client(k):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        buf = b""
        for i in range(N // CLIENTS):
            path = f"/c{k}/r{i}".encode()
            try:
                s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
                while b"\r\n\r\n" not in buf:
                    dd = s.recv(65536)
                    if not dd:
                        raise OSError("closed")
                    buf += dd
                head, _, buf = buf.partition(b"\r\n\r\n")
                cl = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                while len(buf) < cl:
                    dd = s.recv(65536)
                    if not dd:
                        raise OSError("closed")
                    buf += dd
                body, buf = buf[:cl], buf[cl:]
                with lock:
                    total[0] += 1
                    wrong[0] += body != path
            except (OSError, AttributeError):
                with lock:
                    errors[0] += 1
                s.close()
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                buf = b""
        s.close()

    th = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    try:
        if port is None:
            raise RuntimeError("ringproxy did not start: " + open(logp).read())
        for x in th:
            x.start()
        for x in th:
            x.join(300)
    finally:
        p.terminate()
        p.wait(30)
        ls.close()
    share = 100.0 * wrong[0] / max(total[0], 1)
    print(f"mode={MODE} responses={total[0]} wrong={wrong[0]} ({share:.1f}%) errors={errors[0]} "
          f"backend_connections={conns[0]}", flush=True)
    return share


shares = [run() for _ in range(RUNS)]
if RUNS > 1:
    print(f"median wrong share over {RUNS} runs: {statistics.median(shares):.1f}% "
          f"(min {min(shares):.1f}%, max {max(shares):.1f}%)")
