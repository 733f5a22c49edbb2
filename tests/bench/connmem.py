#!/usr/bin/env python3
"""tests/bench/connmem.py -- a proxy's memory per idle client connection.

Opens --conns keep-alive connections to 127.0.0.1:--port and reads the
proxy's memory (VmRSS, and Pss from /proc/PID/smaps_rollup, summed over
--pid) three times: before, with every connection open and nothing sent
yet, and after one request on every connection (all sent, then all
answered, so they are busy at once) with every connection idle again.
Prints one line: conns=N before_rss=.. idle_rss=.. after_rss=.. (bytes per
connection: the growth over the "before" reading divided by N; same for
pss). Python stdlib only; bounded by --timeout seconds."""
import argparse
import resource
import selectors
import socket
import sys
import time


def mem(pids):
    rss = pss = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1]) * 1024
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
    return rss, pss


def settle(pids, secs):
    # wait for the proxy to take the new state in: RSS stable for a while
    time.sleep(secs)
    return mem(pids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, action="append", required=True)
    ap.add_argument("--conns", type=int, default=8000)
    ap.add_argument("--path", default="/thumbs/1/1_200x200.jpg")
    ap.add_argument("--settle", type=float, default=2.5)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    deadline = time.monotonic() + a.timeout
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.conns + 100
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    base = settle(a.pid, 0.5)
    sel = selectors.DefaultSelector()
    socks = []
    for i in range(a.conns):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", a.port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, i)
    pending = a.conns
    while pending:
        if time.monotonic() > deadline:
            sys.exit("connmem: connects timed out")
        for key, _ in sel.select(1):
            err = key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                sys.exit(f"connmem: connect failed: {err}")
            sel.unregister(key.fileobj)
            pending -= 1
    idle = settle(a.pid, a.settle)

    req = f"GET {a.path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
    for s in socks:
        s.setblocking(True)
        s.sendall(req)
        s.setblocking(False)
    bufs = [b""] * a.conns
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    pending = a.conns
    while pending:
        if time.monotonic() > deadline:
            sys.exit(f"connmem: {pending} responses missing")
        for key, _ in sel.select(1):
            i = key.data
            d = key.fileobj.recv(65536)
            if not d:
                sys.exit("connmem: the proxy closed a connection")
            bufs[i] += d
            b = bufs[i]
            end = b.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = b[:end].decode("latin-1").lower()
            if not head.startswith("http/1.1 200"):
                sys.exit("connmem: " + head.splitlines()[0])
            clen = 0
            for line in head.split("\r\n"):
                if line.startswith("content-length:"):
                    clen = int(line.split(":")[1])
            if len(b) >= end + 4 + clen:
                sel.unregister(key.fileobj)
                bufs[i] = b""
                pending -= 1
    after = settle(a.pid, a.settle)
    n = a.conns
    print(f"conns={n} before_rss={(idle[0] - base[0]) // n} after_rss={(after[0] - base[0]) // n} "
          f"before_pss={(idle[1] - base[1]) // n} after_pss={(after[1] - base[1]) // n}")
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
