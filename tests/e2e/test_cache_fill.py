#!/usr/bin/env python3
"""test_cache_fill.py -- what one request leading a cache fill may do to
everyone else asking for the same object, as a client sees it.

A leader whose client does not read: the fill goes on at the backend's
pace (the leader's client reads from the object being filled), so the
requests waiting for it get the whole object at once, not after
lock_timeout; the object is stored; the leader gets all of it, exactly,
once it reads. The same for a chunked body (the leader's copy framed
again: decoded here) and a close-delimited one. A chunked body past
max_object: the fill is dropped as soon as it gets there and the waiters
go to the backend on their own at once; the leader still gets all of it.

A leader whose answer is not the URL's own (a 304 to its own
If-None-Match, a 400 for its oversized header) does not mark the URL
uncacheable, and a non-storable answer never displaces a stored copy
still inside its stale-if-error window: during an outage everyone keeps
getting that copy instead of the backend's 503.

The backend is scripted (harness.Fake). usage: test_cache_fill.py RINGPROXY TESTCACHE"""

import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
SCALE = harness.time_scale(RP)

LOCK_TIMEOUT = 3.0
BIG = b"".join(b"%07d\n" % i for i in range(1 << 20))      # 8 MiB, every line different
HUGE = b"".join(b"%08d\n" % i for i in range((24 << 20) // 9))   # past max_object (16m)
SIE_BODY = b"the copy stored before the outage\n" * 8

script = harness.Script()     # modes: "ok" | "outage" | "nostore" | "503"


def chunked(body):
    """body in chunks of uneven sizes (one byte to 320 KiB), then the
    last-chunk with a trailer."""
    sizes, out, i = (65536, 1, 70001, 4096, 333333, 17), [], 0
    while i < len(body):
        n = sizes[len(out) % len(sizes)]
        out.append(b"%x\r\n" % len(body[i:i + n]) + body[i:i + n] + b"\r\n")
        i += n
    return b"".join(out) + b"0\r\nX-Trailer: t\r\n\r\n"


BIG_CHUNKED = chunked(BIG)
HUGE_CHUNKED = chunked(HUGE)
STALL_HEAD = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"


def handler(fake, s, n):
    for _, _, head, _, _ in fake.requests(s):
        p = head.split(b"\r\n")[0].decode().split(" ")[1].split("?")[0]
        mode = script.seen(p)
        if p.startswith(("/big/", "/chunked/", "/close/", "/huge/")):
            if not p.startswith("/huge/") or script.fetches(p) == 1:
                time.sleep(0.5)         # the waiters attach meanwhile
        if p.startswith("/big/"):
            s.sendall(STALL_HEAD + b"Content-Length: %d\r\n\r\n" % len(BIG) + BIG)
            continue
        if p.startswith("/chunked/"):
            s.sendall(STALL_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + BIG_CHUNKED)
            continue
        if p.startswith("/huge/"):
            s.sendall(STALL_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + HUGE_CHUNKED)
            continue
        if p.startswith("/close/"):
            s.sendall(STALL_HEAD + b"Connection: close\r\n\r\n" + BIG)
            s.shutdown(socket.SHUT_WR)
            return
        if mode in ("outage", "nostore"):
            time.sleep(0.5)             # the waiters attach meanwhile
        if mode == "outage" and len(head) > 8000:
            body = b"header too large\n"
            out = b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        elif mode == "outage" and b"\r\nif-none-match: " in head.lower():
            out = b'HTTP/1.1 304 Not Modified\r\nETag: "e1"\r\nCache-Control: max-age=1, stale-if-error=60\r\n\r\n'
        elif mode in ("outage", "503"):
            body = b"busy\n"
            out = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        elif mode == "nostore":
            body = b"not to be stored\n"
            out = b"HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        else:
            out = (b'HTTP/1.1 200 OK\r\nCache-Control: max-age=1, stale-if-error=60\r\nETag: "e1"\r\n'
                   b"Content-Length: %d\r\n\r\n" % len(SIE_BODY) + SIE_BODY)
        s.sendall(out)


def cs(h):
    return h.get("cache-status", "")


def timed_get(out, i, port, path, headers=None):
    t0 = time.monotonic()
    try:
        st, h, b = harness.get(port, path, headers=headers, timeout=20)
        out[i] = (st, h, b, time.monotonic() - t0)
    except Exception as e:
        out[i] = (0, {}, repr(e).encode(), time.monotonic() - t0)


def timed_head(out, i, port, path):
    """A GET on a connection of its own: when its response head came,
    then the whole response."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        rd = harness.Reader(s)
        while b"\r\n\r\n" not in rd.buf and rd._fill():
            pass
        took = time.monotonic() - t0
        r = rd.response()
        s.close()
        out[i] = (r.status, r, r.body, took)
    except Exception as e:
        out[i] = (0, None, repr(e).encode(), time.monotonic() - t0)


def leader_and_waiters(P, path, n, getter):
    """A leader that sends its GET for path and then does not read, and n
    requests for it meanwhile, each getter(out, i, P, path) in a thread.
    Returns the leader's socket (its response unread) and their outs."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", P))
    # the Host http.client sends, so that the victims' key is the leader's
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{P}\r\n\r\n".encode())
    time.sleep(0.15)                    # the leader's fetch is in flight
    out = [None] * n
    th = [threading.Thread(target=getter, args=(out, i, P, path)) for i in range(n)]
    for x in th:
        x.start()
    for x in th:
        x.join(40)
    return s, out


def over_max_object(P):
    """A chunked body past max_object, its leader not reading: the fill is
    dropped when the body gets there, at the backend's pace, and the
    requests waiting for it go to the backend on their own at once."""
    n = 3
    s, out = leader_and_waiters(P, "/huge/1", n, timed_head)
    slowest = max(o[3] for o in out)
    t.check(all(o[0] == 200 and o[2] == HUGE for o in out),
            f"{n} requests waiting for a non-reading client's chunked fill that grows past max_object "
            "get all of its 24 MiB", [(o[0], len(o[2])) for o in out])
    t.check(slowest < LOCK_TIMEOUT / 2 * SCALE,
            f"... their response heads within {LOCK_TIMEOUT / 2 * SCALE:.1f} s: released when the fill "
            f"passes max_object, not after lock_timeout {LOCK_TIMEOUT:.0f} s (slowest {slowest:.2f} s)",
            [round(o[3], 3) for o in out])
    rd = harness.Reader(s)
    r = rd.response()
    t.check(r.status == 200 and r.framing == "chunked" and r.body == HUGE,
            "the leader gets the whole 24 MiB, correctly chunked, byte for byte, once it reads",
            (r.status, r.framing, len(r.body), r.body[:16 << 20] == HUGE[:16 << 20]))
    s.sendall(f"GET /big/after-huge HTTP/1.1\r\nHost: 127.0.0.1:{P}\r\nConnection: close\r\n\r\n".encode())
    r = rd.response()
    t.check(r.status == 200 and r.body == BIG, "... and its connection serves its next request",
            (r.status, len(r.body)))
    s.close()


def stalled_leader(P, path="/big/1", framing="length"):
    """A leader that sends its GET and then does not read: its client
    must not hold up the fill, nor the requests waiting for it."""
    what = {"length": "", "chunked": " (chunked)", "close": " (close-delimited)"}[framing]
    n = 4
    s, out = leader_and_waiters(P, path, n, timed_get)
    slowest = max(o[3] for o in out)
    t.check(all(o[0] == 200 and o[2] == BIG for o in out),
            f"{n} requests for the object a non-reading client's request is filling{what} get all of its 8 MiB",
            [(o[0], len(o[2]), cs(o[1])) for o in out])
    t.check(slowest < LOCK_TIMEOUT / 2 * SCALE,
            f"... within {LOCK_TIMEOUT / 2 * SCALE:.1f} s (lock_timeout {LOCK_TIMEOUT:.0f} s; slowest "
            f"{slowest:.2f} s, the backend takes 0.5 s)", [round(o[3], 3) for o in out])
    t.check(all("collapsed" in cs(o[1]) or cs(o[1]).startswith("ringproxy; hit") for o in out),
            "... answered from the leader's fetch (Cache-Status collapsed or hit)", [cs(o[1]) for o in out])
    st, h, b = harness.get(P, path, timeout=20)
    t.check(st == 200 and b == BIG and cs(h).startswith("ringproxy; hit") and script.fetches(path) == 1,
            "the object is stored: the next GET is a hit, and the backend was asked once",
            (st, cs(h), script.fetches(path)))
    # now the leader reads, all of it, then asks again on the same connection
    rd = harness.Reader(s)
    r = rd.response()
    t.check(r.status == 200 and r.body == BIG and r.framing == framing
            and (framing != "length" or r.h("content-length") == str(len(BIG))),
            f"the leader{what} gets the whole body, byte for byte, framed as its head says, once it reads",
            (r.status, len(r.body), r.framing, r.h("content-length"), r.h("transfer-encoding")))
    t.check("fwd=miss" in (r.h("cache-status") or ""), "... as the miss that stored it", r.h("cache-status"))
    if framing == "close":
        t.check(rd.closed(), "... and its connection is closed after it", rd.buf[:40])
        s.close()
        return
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{P}\r\nConnection: close\r\n\r\n".encode())
    r = rd.response()
    t.check(r.status == 200 and r.body == BIG and (r.h("cache-status") or "").startswith("ringproxy; hit"),
            "... and its connection serves its next request (a hit)", (r.status, len(r.body), r.h("cache-status")))
    s.close()


def outage(P, path, leader_headers, leader_status, what):
    """An object with stale-if-error, expired, then an outage; one request
    leads a fetch others wait for, and its answer is not storable."""
    st, h, b = harness.get(P, path)
    t.check(st == 200 and b == SIE_BODY and cs(h).endswith("stored"),
            f"{what}: an object with stale-if-error=60 is stored", (st, cs(h)))
    time.sleep(2.2)                     # past its max-age=1
    script.set_mode(path, "nostore" if leader_status == 200 else "outage")
    out = [None, None]
    lt = threading.Thread(target=timed_get, args=(out, 0, P, path, leader_headers))
    lt.start()
    time.sleep(0.15)                    # the leader's fetch is in flight
    wt = threading.Thread(target=timed_get, args=(out, 1, P, path))
    wt.start()
    lt.join(20)
    wt.join(20)
    t.check(out[0][0] == leader_status, f"{what}: the leader gets the backend's {leader_status}",
            (out[0][0], cs(out[0][1]), out[0][2][:40]))
    t.check(out[1][0] == 200, f"{what}: the request that waited for it gets an answer", (out[1][0], out[1][2][:40]))
    script.set_mode(path, "503")
    res = [harness.get(P, path) for _ in range(3)]
    t.check(all(st == 200 and b == SIE_BODY and cs(h).startswith("ringproxy; hit; fwd=stale; detail=stale-if-error")
                for st, h, b in res),
            f"{what}: every later client still gets the stale-if-error copy during the outage, not the 503",
            [(st, cs(h)) for st, h, b in res])


def main():
    fake = harness.Fake(handler)
    conf = harness.conf_text([("fake", fake.port)],
                             proxy={"workers": 2, "retries": 0, "response_timeout": "5s"},
                             health={"passive": "off"},
                             # 512m: the fills in flight may hold size / 16, and a
                             # chunked or close-delimited fill reserves max_object
                             # (16m) while its stalled leader still holds it, so
                             # that the next section's fill is not refused room
                             # when the previous leader's release lags on a
                             # loaded machine
                             cache={"size": "512m", "max_object": "16m", "lock_timeout": "3s",
                                    "min_uses": 1})
    proxy = harness.Proxy(RP, conf, tag="cache_fill")
    P = proxy.port
    stalled_leader(P)
    stalled_leader(P, "/chunked/1", "chunked")
    stalled_leader(P, "/close/1", "close")
    over_max_object(P)
    outage(P, "/sie/cond", {"If-None-Match": '"e1"'}, 304, "a 304 to the leader's own If-None-Match")
    outage(P, "/sie/big", {"X-Pad": "a" * 9000}, 400, "a 400 for the leader's oversized header")
    outage(P, "/sie/nostore", None, 200, "a no-store answer")
    t.check(proxy.alive(), "the proxy is still running")


harness.run_main(t, main)
