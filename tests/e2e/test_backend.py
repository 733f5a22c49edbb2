#!/usr/bin/env python3
"""test_backend.py -- backends that misbehave in ways testcache cannot,
played by a scripted socket server (harness.Fake): a pooled keep-alive
connection the backend resets as a request arrives (resent once on a fresh
connection; not when the backend took the request), invalid response
framing (502, never relayed), bytes after a
response (never read as the next response), close-delimited bodies,
interim 1xx responses, a head dribbled byte by byte, a broken chunked body,
framing that issue 9 found relayed (a Content-Length above 2^63-1, one on a
204 or 1xx, a transfer coding the proxy does not decode).
usage: test_backend.py RINGPROXY TESTCACHE"""

import json
import os
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import raw  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
SCRIPTS = {
    b"/clte": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"/dupcl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    b"/negcl": b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello",
    b"/101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
    b"/garbage": b"HTTP/1.1 2OO OK\r\n\r\n",
    b"/bighead": b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"b" * 20000 + b"\r\nContent-Length: 5\r\n\r\nhello",
    b"/midhead": b"HTTP/1.1 200 OK\r\n" + b"X-Mid: " + b"m" * 6000 + b"\r\nContent-Length: 5\r\n\r\nhello",
    b"/hop": b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Resp-Hop\r\nX-Resp-Hop: 1\r\n"
             b"Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nX-End-To-End: 1\r\n"
             b"Content-Length: 5\r\n\r\nhello",
    b"/extra": OK + b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Smuggled: 1\r\n\r\nbad",
    b"/interim": b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" + OK,
    b"/badchunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
    b"/headbody": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",   # body sent to a HEAD
    # issue 9: each of these was relayed
    b"/hugecl": b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nhello",
    b"/cl2p63": b"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\nhello",
    b"/204cl": b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    b"/100cl": b"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n" + OK,
    b"/gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b\x08\x00coded",
    b"/gzipchunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\n\x1f\x8b\x08\x00c\r\n0\r\n\r\n",
    b"/chunkedgzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n\x1f\x8b\x08\x00coded",
    b"/http10chunked": b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
}
CLOSING = (b"/badchunk", b"/101", b"/gzip", b"/chunkedgzip", b"/http10chunked")


def bad_responses(port):
    """The fake backend's bad_responses counter from /stats."""
    st, h, body = harness.get(port, "/stats")
    return {b["name"]: b for b in json.loads(body)["backends"]}["fake"]["bad_responses"]


def handler(fake, s, n):
    served = 0
    rest = b""
    while True:
        if served and not rest:
            # an idle keep-alive connection: wait for the next request
            # without reading it, then act as fake.idle says
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
            if not select.select([s], [], [], 30)[0]:
                return
            if fake.idle == "reset":
                # gone before taking the request: reset, and no byte of
                # it acknowledged (delayed ACKs, and nothing read)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                fake.idle = None
                return
        head, rest = fake.read_head(s, rest)
        if not head:
            return
        path = head.split(b" ")[1]
        if path == b"/stale" and served:
            return      # took the request, then closed without a response
        if path in (b"/connclose", b"/http10"):
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
                      if path == b"/connclose" else b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            return
        if path == b"/close":
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"c" * 100000)
            return
        if path == b"/slowhead":
            for b in OK:
                s.sendall(bytes([b]))
                time.sleep(0.002)
        elif path in SCRIPTS:
            s.sendall(SCRIPTS[path])
            if path in CLOSING:
                time.sleep(0.5)
                return
        else:
            s.sendall(OK)
        served += 1


fake = harness.Fake(handler)
fake.idle = None
try:
    proxy = harness.Proxy(RP, harness.conf_text([("fake", fake.port)], proxy={
        "workers": 1, "retries": 0, "admin_listen": "127.0.0.1:0"}), "backend")
    P = proxy.port
    A = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/").group(1))

    # a stale pooled connection: resent once on a fresh one, but only if
    # the backend acknowledged none of the request
    st, h, body = proxy.get("/ok")
    conns = fake.conns
    fake.idle = "reset"
    st, h, body = proxy.get("/ok2")
    t.check(st == 200 and body == b"hello", "a pooled connection the backend resets as the request "
            "arrives, none of it acknowledged: the GET is resent on a fresh connection", [st, body])
    t.check(fake.conns == conns + 1, "... exactly one fresh connection")
    conns = fake.conns
    st, h, body = proxy.get("/stale")
    t.check(st == 502 and fake.conns == conns, "a pooled connection the backend closes after taking the "
            "request: not resent (it may have acted on it), 502 (retries = 0)", [st, body, fake.conns - conns])

    for path, what in ((b"/clte", "Content-Length and Transfer-Encoding"),
                       (b"/dupcl", "two different Content-Lengths"),
                       (b"/negcl", "a negative Content-Length"),
                       (b"/101", "101 to a request that asked no upgrade"),
                       (b"/garbage", "an unparsable status line"),
                       (b"/bighead", "a head over max_head_size")):
        (r,), rd = raw(P, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path)
        rid = harness.request_id(r.body)
        t.check(r.status == 502 and rid and b"fake" not in r.body and proxy.wait_log(
                rf"request {rid}: 502 for GET {path.decode()} from [^\n]*: backend fake \(127\.0\.0\.1:{fake.port}\): ", 5),
                f"a response with {what}: 502, the backend named in the log line of its request id",
                [r.status, r.body[:120]])
        rd.s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        r = rd.response()
        t.check(r.status == 200 and r.body == b"hello", "... and the client connection goes on")
        rd.s.close()

    # issue 9: a length above 2^63-1, or a transfer coding the proxy does
    # not decode, is a 502 counted against the backend like any invalid
    # response, and never relayed
    for path, what in ((b"/hugecl", "Content-Length: 18446744073709551615"),
                       (b"/cl2p63", "Content-Length: 2^63"),
                       (b"/gzip", "Transfer-Encoding: gzip"),
                       (b"/gzipchunked", "Transfer-Encoding: gzip, chunked"),
                       (b"/chunkedgzip", "Transfer-Encoding: chunked, gzip"),
                       (b"/http10chunked", "chunked in an HTTP/1.0 response")):
        bad = bad_responses(A)
        s = proxy.sock(timeout=5)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path)
        rd = harness.Reader(s)
        try:
            r = rd.response()
            got = [r.status, r.headers, r.body[:120]]
        except (OSError, EOFError, ValueError) as e:
            r, got = None, repr(e)
        t.check(r is not None and r.status == 502 and b"coded" not in r.body and b"hello" not in r.body,
                f"a response with {what}: 502, nothing of it relayed", got)
        t.check(bad_responses(A) == bad + 1, "... counted as a bad response of the backend")
        try:
            s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            r = rd.response()
        except (OSError, EOFError, ValueError):
            r = None
        t.check(r is not None and r.status == 200 and r.body == b"hello",
                "... and the client connection goes on")
        s.close()

    # issue 9: a 204 or 1xx reaches the client without the backend's
    # Content-Length (RFC 9110 8.6)
    rs, rd = raw(P, b"GET /204cl HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n", n=2)
    t.check(rs[0].status == 204 and rs[0].h("Content-Length") is None and rs[0].h("Transfer-Encoding") is None,
            "HTTP/1.1 204 No Content with Content-Length: 5 reaches the client without it", rs[0].headers)
    t.check(rs[1].status == 200 and rs[1].body == b"hello", "... and the next response follows intact")
    rd.s.close()
    s = proxy.sock()
    s.sendall(b"GET /100cl HTTP/1.1\r\nHost: x\r\n\r\n")
    rd = harness.Reader(s)
    r1 = rd.response()
    r2 = rd.response()
    t.check(r1.status == 100 and r1.h("Content-Length") is None and r2.status == 200 and r2.body == b"hello",
            "a 100 Continue with Content-Length: 5 is relayed without it, then the response",
            [r1.status, r1.headers, r2.status])
    s.close()

    # hop-by-hop response headers stay between backend and proxy
    (r,), rd = raw(P, b"GET /hop HTTP/1.1\r\nHost: x\r\n\r\n")
    names = {k.lower() for k, v in r.headers}
    t.check(r.body == b"hello" and not names & {"x-resp-hop", "keep-alive", "proxy-connection"}
            and "x-end-to-end" in names and (r.h("Connection") or "").lower() != "keep-alive, x-resp-hop",
            "hop-by-hop response headers (Connection-listed, Keep-Alive, Proxy-Connection) are removed",
            r.headers)
    rd.s.close()

    # bytes after a complete response: never the next response
    rs, rd = raw(P, b"GET /extra HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n", n=2)
    t.check(rs[0].body == b"hello" and rs[1].body == b"hello" and rs[1].h("X-Smuggled") is None,
            "bytes after a response are not taken as the next one", [r.headers for r in rs])
    rd.s.close()
    rs, rd = raw(P, b"HEAD /headbody HTTP/1.1\r\nHost: x\r\n\r\n", head_only=True)
    rd.s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
    r = rd.response()
    t.check(rs[0].status == 200 and r.status == 200 and r.body == b"hello",
            "a body sent to a HEAD is not taken as the next response")
    rd.s.close()

    # a backend that closes after a response: the client's connection stays
    for path in (b"/connclose", b"/http10"):
        rs, rd = raw(P, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n" % path, n=2)
        t.check(rs[0].body == b"hello" and (rs[0].h("Connection") or "").lower() != "close"
                and rs[1].body == b"hello" and not rd.closed(0.2),
                f"{path.decode()}: a backend's close is not the client's", [r.headers for r in rs])
        rd.s.close()

    # close-delimited body
    (r,), rd = raw(P, b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n")
    t.check(r.status == 200 and r.body == b"c" * 100000,
            "a close-delimited body reaches an HTTP/1.1 client whole", [r.framing, len(r.body)])
    t.check(r.framing in ("close", "chunked") and (r.framing == "chunked" or rd.eof),
            "... delimited by close (or re-framed)")

    # 1xx interim
    s = proxy.sock()
    s.sendall(b"GET /interim HTTP/1.1\r\nHost: x\r\n\r\n")
    rd = harness.Reader(s)
    r1 = rd.response()
    r2 = rd.response()
    t.check(r1.status == 103 and r1.h("Link") and r2.status == 200 and r2.body == b"hello",
            "103 Early Hints relayed to an HTTP/1.1 client, then the response")
    s.close()
    (r,), rd = raw(P, b"GET /interim HTTP/1.0\r\n\r\n")
    t.check(r.status == 200 and r.body == b"hello", "... and dropped for an HTTP/1.0 client")
    rd.s.close()

    (r,), rd = raw(P, b"GET /slowhead HTTP/1.1\r\nHost: x\r\n\r\n")
    t.check(r.status == 200 and r.body == b"hello", "a response head dribbled byte by byte")
    rd.s.close()

    s = proxy.sock()
    s.sendall(b"GET /badchunk HTTP/1.1\r\nHost: x\r\n\r\n")
    rd = harness.Reader(s)
    try:
        r = rd.response()
        ok = False
    except (EOFError, ValueError, ConnectionResetError):
        ok = True
    t.check(ok, "a broken chunked body: the client connection ends before a complete body")
    s.close()

    st, h, body = proxy.get("/ok")
    t.check(st == 200 and body == b"hello", "the proxy serves after all of this")
    t.check(proxy.stop() == 0, "SIGTERM: exit 0")

    # the smallest buffer (4k, with max_head_size 4k: the config refuses a
    # buffer smaller than a head may be): larger heads are refused at once
    proxy = harness.Proxy(RP, harness.conf_text([("fake", fake.port)], proxy={
        "workers": 1, "retries": 0, "buffer_size": "4k", "max_head_size": "4k",
        "client_timeout": "5s", "response_timeout": "5s"}),
        "backend-4k")
    big = b"GET /ok HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"p" * 6000 + b"\r\n\r\n"
    t0 = time.monotonic()
    (r,), rd = raw(proxy.port, big)
    dt = time.monotonic() - t0
    t.check(r.status == 431 and dt < 2, f"buffer_size 4k: a 6 kB request head gets 431 at once ({dt:.2f}s)", r.status)
    rd.s.close()
    t0 = time.monotonic()
    (r,), rd = raw(proxy.port, b"GET /midhead HTTP/1.1\r\nHost: x\r\n\r\n")
    dt = time.monotonic() - t0
    t.check(r.status == 502 and dt < 2, f"buffer_size 4k: a 6 kB response head gets 502 at once ({dt:.2f}s)",
            [r.status, r.body])
    rd.s.close()
    t.check(proxy.stop() == 0, "SIGTERM: exit 0")
finally:
    fake.stop()
t.done()
