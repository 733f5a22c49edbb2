#!/usr/bin/env python3
"""test_h2.py -- HTTP/2 with prior knowledge on the plain listener
([proxy] h2c): each stream a request through the same road as an
HTTP/1.1 one (the backend, the cache, the access log), the conformance
cases of RFC 9113 a server must meet, and the floods, each sent for real
(10,000 frames or fields) with what it may cost asserted: the attacking
connection or its streams end, the backends get at most
max_concurrent_streams requests. Frames are made and read with Debian's
python3-h2 parts (hyperframe, hpack), so that a test can send what no
well-behaved client would; the real clients (curl, nghttp) run when
installed.
usage: test_h2.py RINGPROXY TESTCACHE"""

import json
import re
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

try:
    import hpack
    import hyperframe.frame as hf
except ImportError:  # a python3 other than Debian's on PATH
    sys.path.append("/usr/lib/python3/dist-packages")
    import hpack
    import hyperframe.frame as hf

RP, TC = harness.cli_args()
t = harness.Tap()

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# error codes (RFC 9113 7)
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = 0, 1, 3, 7, 8, 11
MAX_STREAMS = 100


class H2:
    """A raw HTTP/2 client connection: frames out as given, frames in as
    parsed, headers through its own HPACK state."""

    def __init__(self, port, settings=None, preface=True, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.dec.max_allowed_table_size = 65536
        self.buf = b""
        self.closed = False
        self.hlen = {}      # stream id: bytes of its response's header block
        self.heads = {}     # stream id: [(status, headers)] of every head, interim ones first
        if preface:
            sf = hf.SettingsFrame(0)
            for k, v in (settings or {}).items():
                sf.settings[k] = v
            self.send(PREFACE + sf.serialize())

    def send(self, data):
        self.s.sendall(data)

    def frame(self, f):
        self.send(f.serialize())

    def headers(self, sid, path, method="GET", extra=(), end_stream=True, authority="img.test"):
        hdrs = [(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)]
        hdrs += list(extra)
        f = hf.HeadersFrame(sid)
        f.data = self.enc.encode(hdrs)
        f.flags.add("END_HEADERS")
        if end_stream:
            f.flags.add("END_STREAM")
        return f

    def get(self, sid, path, **kw):
        self.frame(self.headers(sid, path, **kw))

    def recv_frame(self, timeout=10):
        """The next frame, or None at EOF or after timeout s."""
        self.s.settimeout(timeout)
        while True:
            if len(self.buf) >= 9:
                f, length = hf.Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) >= 9 + length:
                    f.parse_body(memoryview(self.buf[9:9 + length]))
                    self.buf = self.buf[9 + length:]
                    if isinstance(f, (hf.HeadersFrame, hf.ContinuationFrame)):
                        f.fields = self.dec.decode(bytes(f.data)) if "END_HEADERS" in f.flags else []
                    return f
            try:
                d = self.s.recv(65536)
            except (socket.timeout, ConnectionError):
                return None
            if not d:
                self.closed = True
                return None
            self.buf += d

    def until(self, pred, timeout=10):
        """Frames until pred(frame) is true (that frame), None at EOF or
        timeout; acks SETTINGS and opens the windows as data comes."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            f = self.recv_frame(max(0.05, end - time.monotonic()))
            if f is None:
                if self.closed:
                    return None
                continue
            if isinstance(f, hf.SettingsFrame) and "ACK" not in f.flags:
                self.frame(hf.SettingsFrame(0, flags=["ACK"]))
            if pred(f):
                return f
        return None

    def responses(self, sids, timeout=20, window=True):
        """{sid: (status, headers dict, body, ended_by)} for streams sids:
        ended_by "end" (END_STREAM) or an RST_STREAM error code."""
        out = {s: [None, {}, b"", None] for s in sids}
        left = set(sids)
        end = time.monotonic() + timeout
        while left and time.monotonic() < end:
            f = self.recv_frame(max(0.05, end - time.monotonic()))
            if f is None:
                if self.closed:
                    break
                continue
            if isinstance(f, hf.SettingsFrame) and "ACK" not in f.flags:
                self.frame(hf.SettingsFrame(0, flags=["ACK"]))
            if isinstance(f, hf.GoAwayFrame):
                self.goaway = f
            if f.stream_id not in out:
                continue
            r = out[f.stream_id]
            if isinstance(f, hf.HeadersFrame):
                h = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v) for k, v in f.fields}
                r[0] = int(h.get(":status", 0))
                r[1] = h
                self.heads.setdefault(f.stream_id, []).append((r[0], h))
                self.hlen[f.stream_id] = len(f.data)
            elif isinstance(f, hf.DataFrame):
                r[2] += bytes(f.data)
                if window and len(f.data):
                    try:
                        self.frame(hf.WindowUpdateFrame(0, window_increment=len(f.data)))
                        if "END_STREAM" not in f.flags:
                            self.frame(hf.WindowUpdateFrame(f.stream_id, window_increment=len(f.data)))
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the server closed after a GOAWAY
            elif isinstance(f, hf.RstStreamFrame):
                r[3] = f.error_code
                left.discard(f.stream_id)
            if "END_STREAM" in getattr(f, "flags", ()) and not isinstance(f, hf.RstStreamFrame):
                r[3] = "end"
                left.discard(f.stream_id)
        return {s: tuple(v) for s, v in out.items()}

    def goaway_code(self, timeout=15):
        """The error code of the GOAWAY that ends the connection (reading
        through whatever comes first), "eof" when it closed without one,
        None when it stayed open for timeout s."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                f = self.recv_frame(max(0.05, end - time.monotonic()))
            except Exception:
                return "eof"
            if f is None:
                if self.closed:
                    return "eof"
                continue
            if isinstance(f, hf.GoAwayFrame):
                return f.error_code
        return None

    def close(self):
        self.s.close()


def backend_requests(cache):
    return cache.stats()["requests"]


def stats(admin):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/stats", timeout=10) as r:
        return json.loads(r.read())


def main():
    c1 = harness.Cache(TC, "c1")
    conf = harness.conf_text([c1], proxy={"workers": 1, "admin_listen": "127.0.0.1:0"},
                             cache={"size": "16m", "min_uses": 1}) + \
        "\n[log]\naccess = stderr\n\n[h2]\nsend_timeout = 1s\nmax_requests = 1000\n"
    p = harness.Proxy(RP, conf, "h2")
    admin = p.admin_port()
    port = p.port

    # ---- the road: a GET, a hit, HEAD, POST with and without a length ----
    h = H2(port)
    first = h.until(lambda f: True)
    t.check(isinstance(first, hf.SettingsFrame) and "ACK" not in first.flags,
         "3.4: the server's first frame is SETTINGS")
    t.check(first is not None and first.settings.get(hf.SettingsFrame.MAX_CONCURRENT_STREAMS) == MAX_STREAMS,
         "SETTINGS_MAX_CONCURRENT_STREAMS is [h2] max_concurrent_streams (100)")
    t.check(first is not None and first.settings.get(hf.SettingsFrame.MAX_HEADER_LIST_SIZE) == 16384,
         "SETTINGS_MAX_HEADER_LIST_SIZE is max_head_size")
    h.get(1, "/h2/a.jpg")
    r = h.responses([1])[1]
    t.check(r[0] == 200 and r[2] == harness.body_for("/h2/a.jpg") and r[3] == "end",
         "a GET over h2c: 200 and the backend's body")
    t.check(r[1].get("x-echo-host") == "img.test", ":authority is the backend's Host")
    t.check(all(k == k.lower() for k in r[1]) and "connection" not in r[1] and "transfer-encoding" not in r[1],
         "response fields lowercase, no connection-specific ones (8.2.2)")
    t.check(r[1].get("via") == "1.1 ringproxy" and r[1].get("x-ringproxy-backend") == "c1" and
            r[1].get("cache-status", "").startswith("ringproxy; fwd=miss") and r[1].get("content-length") == "4096",
            f"a forward's fields as over HTTP/1.1: Via, the backend, Cache-Status, content-length (got {r[1]})")
    h.get(3, "/h2/a.jpg")
    r = h.responses([3])[3]
    t.check(r[0] == 200 and r[2] == harness.body_for("/h2/a.jpg") and "hit" in r[1].get("cache-status", ""),
         "the same URL again is a cache hit, same body")
    t.check(all(k == k.lower() for k in r[1]) and "connection" not in r[1] and r[1].get("x-backend") == "c1",
         f"a hit's fields: lowercase, no connection-specific ones, the stored ones (got {r[1]})")
    h.get(5, "/h2/a.jpg", method="HEAD")
    r = h.responses([5])[5]
    t.check(r[0] == 200 and r[2] == b"" and r[1].get("content-length") == "4096" and r[3] == "end",
         "HEAD: the head with its content-length, no body")
    body = bytes(range(256)) * 40
    f = h.headers(7, "/h2/post", method="POST", extra=[("content-length", str(len(body)))], end_stream=False)
    h.frame(f)
    d = hf.DataFrame(7, data=body)
    d.flags.add("END_STREAM")
    h.frame(d)
    r = h.responses([7])[7]
    t.check(r[0] == 200 and r[2] == body, "POST with a content-length: the backend got the body (echoed)")
    h.frame(h.headers(9, "/h2/post2", method="POST", end_stream=False))
    for i in range(4):
        h.frame(hf.DataFrame(9, data=body[:3000]))
    d = hf.DataFrame(9, data=b"end")
    d.flags.add("END_STREAM")
    h.frame(d)
    r = h.responses([9])[9]
    t.check(r[0] == 200 and r[2] == body[:3000] * 4 + b"end", "POST without a content-length: the body, chunked to the backend")
    h.frame(h.headers(11, "/h2/c.jpg", extra=[("cookie", "a=1"), ("cookie", "b=2"), ("x-hop-test", "v")]))
    r = h.responses([11])[11]
    t.check(r[0] == 200, "cookie crumbs and other fields pass")
    # many streams at once
    before = backend_requests(c1)
    sids = list(range(13, 13 + 2 * 100, 2))
    h.send(b"".join(h.headers(s, f"/h2/many/{s}.jpg").serialize() for s in sids))
    rs = h.responses(sids, timeout=30)
    t.check(all(rs[s][0] == 200 and rs[s][2] == harness.body_for(f"/h2/many/{s}.jpg") for s in sids),
         "100 streams at once on one connection: every body right")
    t.check(backend_requests(c1) - before == 100, "each fetched once from the backend")
    # a head of 12 kB, within the limits: a stream's buffers start at 1 kB
    # and grow to it; a stream reused after it serves a small one
    long_path = "/h2/long/" + "p" * 1500 + ".jpg"
    hop = "v" * 3000
    big = [("x-hop-test", hop)] + [("cookie", f"c{i}=" + "k" * 200) for i in range(20)] + \
          [(f"x-field-{i}", "f" * 40) for i in range(40)]
    h.frame(h.headers(213, long_path, extra=big))
    r = h.responses([213])[213]
    t.check(r[0] == 200 and r[2] == harness.body_for(long_path) and r[1].get("x-echo-x-hop-test") == hop,
         f"a 12 kB request head: served whole (got {r[0]})")
    h.get(215, "/h2/after-long.jpg")
    r = h.responses([215])[215]
    t.check(r[0] == 200 and r[2] == harness.body_for("/h2/after-long.jpg"), "the next stream after it: served")
    h.get(217, "/h2/chunked.jpg?chunked=1")
    r = h.responses([217])[217]
    t.check(r[0] == 200 and r[2] == harness.body_for("/h2/chunked.jpg?chunked=1") and r[3] == "end" and
            "transfer-encoding" not in r[1] and "content-length" not in r[1],
            f"a chunked backend response: its body decoded into DATA, no framing field (got {r[0]}, {r[1]})")
    # HPACK: fields that repeat stay in the table; a value never sent
    # before under its name twice running (the test cache's request
    # counter, as Varnish's X-Varnish) goes without indexing, so it does
    # not push the repeating ones out (the table is FIFO): before, every
    # 30th response sent them all again (218 bytes instead of 22)
    sizes = []
    for i in range(60):
        sid = 219 + 2 * i
        h.get(sid, f"/h2/hpack/{i}.jpg")
        rr = h.responses([sid])[sid]
        sizes.append(h.hlen.get(sid, 0) if rr[0] == 200 else 9999)
    t.check(max(sizes[2:]) <= 80, f"60 forwards: each header block after the second is small (bytes: {sizes})")
    h.close()

    # a large response under a small window, read as the window allows
    h = H2(port, settings={hf.SettingsFrame.INITIAL_WINDOW_SIZE: 1024})
    h.get(1, "/h2/big.jpg?size=300000")
    r = h.responses([1], timeout=30)[1]
    t.check(r[0] == 200 and r[2] == harness.body_for("/h2/big.jpg?size=300000", 300000),
         "300 kB through a 1 kB window: all of it, in order")
    h.get(3, "/h2/bigc.jpg?size=200000&chunked=1")
    r = h.responses([3], timeout=30)[3]
    t.check(r[0] == 200 and len(r[2]) == 200000 and r[3] == "end", "a chunked backend response: decoded, complete")
    h.close()

    # RFC 9218 priorities: two ready responses, the more urgent written
    # first although asked for second; without the field, in stream order
    # (the control, so that the check can tell)
    def finish_order(extra_a, extra_b, tag, after=b""):
        a, b = f"/h2/prio/{tag}-a.jpg?size=200000", f"/h2/prio/{tag}-b.jpg?size=200000"
        w = H2(port)
        w.get(1, a)
        w.get(3, b)
        w.responses([1, 3], timeout=30)     # both stored: hits next
        w.close()
        w = H2(port, settings={hf.SettingsFrame.INITIAL_WINDOW_SIZE: 1 << 30})
        w.frame(hf.WindowUpdateFrame(0, window_increment=1 << 30))
        w.send(w.headers(1, a, extra=extra_a).serialize() + w.headers(3, b, extra=extra_b).serialize() + after)
        order, end = [], time.monotonic() + 30
        while len(order) < 2 and time.monotonic() < end:
            f = w.recv_frame(max(0.05, end - time.monotonic()))
            if f is None and w.closed:
                break
            if isinstance(f, hf.SettingsFrame) and "ACK" not in f.flags:
                w.frame(hf.SettingsFrame(0, flags=["ACK"]))
            if isinstance(f, hf.DataFrame) and "END_STREAM" in f.flags:
                order.append(f.stream_id)
        w.close()
        return order
    got = finish_order([("priority", "u=6")], [("priority", "u=1")], "urgent")
    t.check(got == [3, 1], "RFC 9218: priority u=1 asked second finishes before u=6 asked first", got)
    got = finish_order([], [], "plain")
    t.check(got == [1, 3], "... and without the field, the two finish in the order asked (the same urgency)", got)
    # a browser reorders what it asked with PRIORITY_UPDATE (type 0x10 on
    # stream 0: the stream's id, then the priority field's value)
    upd = struct.pack(">I", 7)[1:] + b"\x10\x00" + struct.pack(">I", 0) + struct.pack(">I", 3) + b"u=1"
    got = finish_order([], [], "update", after=upd)
    t.check(got == [3, 1], "RFC 9218: a PRIORITY_UPDATE to u=1 for the second stream: it finishes first", got)

    log = p.wait_log(r'"GET /h2/a\.jpg HTTP/2" 200 .* stream=1', timeout=5)
    t.check(log is not None, "the access log line says HTTP/2 and the stream id")

    # ---- RFC 9113 conformance --------------------------------------------
    def conn_error(send, code, what, settings=None):
        h = H2(port, settings=settings)
        h.until(lambda f: isinstance(f, hf.SettingsFrame))
        send(h)
        got = h.goaway_code()
        h.close()
        t.check(got == code, f"{what}: GOAWAY {code} (got {got})")

    def stream_error(frames, what, code=PROTOCOL_ERROR, path=None):
        h = H2(port)
        h.until(lambda f: isinstance(f, hf.SettingsFrame))
        frames(h)
        r = h.responses([1], timeout=10)[1]
        # the connection lives on: the next stream is served
        h.get(3, path or "/h2/after.jpg")
        r2 = h.responses([3], timeout=10)[3]
        h.close()
        t.check(r[3] == code and r2[0] == 200, f"{what}: RST_STREAM {code}, the connection goes on (got {r[3]}, {r2[0]})")

    # 3.4: a bad preface
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + hf.SettingsFrame(0).serialize())
    data = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
    except (socket.timeout, ConnectionError):
        pass
    s.close()
    t.check(b"HTTP/1.1 200" not in data, "3.4: a preface with wrong bytes after its first line is not served")
    # 5.1.1: an even stream id from the client
    conn_error(lambda h: h.get(2, "/x"), PROTOCOL_ERROR, "5.1.1 an even stream id")
    # 5.1.1: a stream id lower than one used
    # (nghttp2 ignores a HEADERS on a lower, never used id rather than end
    # the connection, since it cannot tell it from trailers of a stream it
    # reset: the request is not served, the connection goes on)
    h = H2(port)
    h.get(5, "/h2/five.jpg")
    r5 = h.responses([5])[5]
    h.get(3, "/h2/three.jpg")
    h.get(7, "/h2/seven.jpg")
    rs = h.responses([3, 7], timeout=5)
    h.close()
    t.check(r5[0] == 200 and rs[3][0] is None and rs[7][0] == 200,
            "5.1.1 a HEADERS on a lower stream id than one used is not served")
    # 5.1: DATA on an idle stream
    conn_error(lambda h: h.frame(hf.DataFrame(9, data=b"x")), PROTOCOL_ERROR, "5.1 DATA on an idle stream")
    # 6.5.2: ENABLE_PUSH other than 0/1, a window too large, a frame size too small
    conn_error(lambda h: h.frame(hf.SettingsFrame(0, settings={hf.SettingsFrame.ENABLE_PUSH: 2})),
               PROTOCOL_ERROR, "6.5.2 SETTINGS_ENABLE_PUSH = 2")
    conn_error(lambda h: h.frame(hf.SettingsFrame(0, settings={hf.SettingsFrame.INITIAL_WINDOW_SIZE: 2 ** 31})),
               FLOW_CONTROL_ERROR, "6.5.2 SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1")
    conn_error(lambda h: h.frame(hf.SettingsFrame(0, settings={hf.SettingsFrame.MAX_FRAME_SIZE: 100})),
               PROTOCOL_ERROR, "6.5.2 SETTINGS_MAX_FRAME_SIZE under 16384")
    # 6.5: SETTINGS with a stream id; 6.7 PING with one
    conn_error(lambda h: h.send(b"\x00\x00\x00\x04\x00\x00\x00\x00\x01"), PROTOCOL_ERROR,
               "6.5 SETTINGS on a stream")
    conn_error(lambda h: h.send(b"\x00\x00\x08\x06\x00\x00\x00\x00\x03" + b"12345678"), PROTOCOL_ERROR,
               "6.7 PING on a stream")
    # 6.7: PING answered with its payload
    h = H2(port)
    f = h.until(lambda f: isinstance(f, hf.SettingsFrame) and "ACK" in f.flags, timeout=5)
    t.check(f is not None, "6.5.3 the client's SETTINGS acknowledged")
    h.frame(hf.PingFrame(0, opaque_data=b"ringping"))
    f = h.until(lambda f: isinstance(f, hf.PingFrame))
    t.check(f is not None and "ACK" in f.flags and f.opaque_data == b"ringping", "6.7 PING: an ACK with the same payload")
    h.close()
    # 6.9: WINDOW_UPDATE of 0 on the connection; a window past 2^31-1
    conn_error(lambda h: h.frame(hf.WindowUpdateFrame(0, window_increment=0)), PROTOCOL_ERROR,
               "6.9 WINDOW_UPDATE of 0 on the connection")
    conn_error(lambda h: h.frame(hf.WindowUpdateFrame(0, window_increment=2 ** 31 - 1)), FLOW_CONTROL_ERROR,
               "6.9.1 a connection window past 2^31-1")
    # 4.2: a frame over SETTINGS_MAX_FRAME_SIZE, in the same write as three POSTs whose
    # bodies never come: nghttp2 finds the connection error itself and sends nothing after
    # its GOAWAY, so the streams' answers can never go out; the connection closes after the
    # GOAWAY instead of waiting for them with the socket unread (a connection and its
    # streams held for ever, found by fuzz-h2)
    h = H2(port)
    h.until(lambda f: isinstance(f, hf.SettingsFrame))
    big = struct.pack(">I", 5_000_000)[1:] + b"\x62\x00" + struct.pack(">I", 1)
    h.send(b"".join(h.headers(s, f"/ce/{s}.jpg", method="POST", end_stream=False).serialize()
                    for s in (1, 3, 5)) + big)
    code = h.goaway_code()
    end = time.monotonic() + 10
    while not h.closed and time.monotonic() < end:
        h.recv_frame(max(0.05, end - time.monotonic()))
    h.close()
    t.check(code == 6 and h.closed,
            "4.2 a frame over the size limit while three POSTs wait for their bodies: GOAWAY "
            "FRAME_SIZE_ERROR, then the connection closed", (code, h.closed))
    # 6.10: a HEADERS without END_HEADERS then a frame other than CONTINUATION
    def cont_broken(h):
        f = h.headers(1, "/x")
        f.flags.discard("END_HEADERS")
        h.frame(f)
        h.frame(hf.PingFrame(0, opaque_data=b"12345678"))
    conn_error(cont_broken, PROTOCOL_ERROR, "6.10 CONTINUATION expected, PING came")

    def cont_other_stream(h):
        f = h.headers(1, "/x")
        f.flags.discard("END_HEADERS")
        h.frame(f)
        c = hf.ContinuationFrame(3, data=h.enc.encode([("a", "b")]))
        c.flags.add("END_HEADERS")
        h.frame(c)
    conn_error(cont_other_stream, PROTOCOL_ERROR, "6.10 CONTINUATION on another stream")
    # a header block split over CONTINUATION frames is served
    h = H2(port)
    blk = h.enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "img.test"),
                        (":path", "/h2/cont.jpg"), ("x-a", "1" * 100)])
    f = hf.HeadersFrame(1, data=blk[:10])
    f.flags.add("END_STREAM")
    h.frame(f)
    c = hf.ContinuationFrame(1, data=blk[10:50])
    h.frame(c)
    c = hf.ContinuationFrame(1, data=blk[50:])
    c.flags.add("END_HEADERS")
    h.frame(c)
    r = h.responses([1])[1]
    t.check(r[0] == 200, "6.10 a header block in HEADERS and two CONTINUATIONs is served")
    h.close()
    # 8.2.1 / 8.2.2 / 8.3.1 / 8.1.1: malformed requests are stream errors
    stream_error(lambda h: h.get(1, "/x", extra=[("X-Upper", "1")]), "8.2.1 an uppercase field name")
    stream_error(lambda h: h.get(1, "/x", extra=[("connection", "keep-alive")]), "8.2.2 a connection field")
    stream_error(lambda h: h.get(1, "/x", extra=[("transfer-encoding", "chunked")]), "8.2.2 transfer-encoding")
    stream_error(lambda h: h.get(1, "/x", extra=[("te", "gzip")]), "8.2.2 te other than trailers")

    def no_path(h):
        f = hf.HeadersFrame(1, data=h.enc.encode([(":method", "GET"), (":scheme", "http"),
                                                  (":authority", "x")]))
        f.flags.add("END_HEADERS")
        f.flags.add("END_STREAM")
        h.frame(f)
    stream_error(no_path, "8.3.1 no :path")

    def pseudo_after(h):
        f = hf.HeadersFrame(1, data=h.enc.encode([(":method", "GET"), (":scheme", "http"), ("x-a", "1"),
                                                  (":path", "/x"), (":authority", "x")]))
        f.flags.add("END_HEADERS")
        f.flags.add("END_STREAM")
        h.frame(f)
    stream_error(pseudo_after, "8.3 a pseudo field after a regular one")

    def cl_mismatch(h):
        h.frame(h.headers(1, "/h2/p", method="POST", extra=[("content-length", "10")], end_stream=False))
        d = hf.DataFrame(1, data=b"12345")
        d.flags.add("END_STREAM")
        h.frame(d)
    stream_error(cl_mismatch, "8.1.1 content-length 10, 5 bytes of DATA")
    h = H2(port)
    h.get(1, "/h2/te.jpg", extra=[("te", "trailers")])
    t.check(h.responses([1])[1][0] == 200, "8.2.2 te: trailers is allowed")
    h.close()
    # 6.9: a stream WINDOW_UPDATE of 0 is a stream error at least;
    # nghttp2 ends the connection for it (allowed: 5.4.1)
    conn_error(lambda h: (h.get(1, "/h2/slow.jpg?delay=300"), h.frame(hf.WindowUpdateFrame(1, window_increment=0))),
               PROTOCOL_ERROR, "6.9 WINDOW_UPDATE of 0 on a stream")

    # ---- floods -----------------------------------------------------------
    # Rapid Reset: 10,000 HEADERS + RST_STREAM pairs, each a new URL
    before = backend_requests(c1)
    h = H2(port)
    h.until(lambda f: isinstance(f, hf.SettingsFrame))
    chunk = []
    sent = 0
    try:
        for i in range(10000):
            sid = 1 + 2 * i
            chunk.append(h.headers(sid, f"/rr/{i}.jpg").serialize())
            chunk.append(hf.RstStreamFrame(sid, error_code=CANCEL).serialize())
            if len(chunk) >= 200:
                h.send(b"".join(chunk))
                sent += len(chunk) // 2
                chunk = []
    except (BrokenPipeError, ConnectionResetError):
        pass
    code = h.goaway_code(timeout=20)
    h.close()
    time.sleep(0.5)
    cost = backend_requests(c1) - before
    t.check(code == ENHANCE_YOUR_CALM, f"Rapid Reset: GOAWAY ENHANCE_YOUR_CALM (got {code}) after {sent} pairs sent")
    t.check(cost <= MAX_STREAMS, f"Rapid Reset: the backend got {cost} requests (<= {MAX_STREAMS})")

    # CONTINUATION flood: a HEADERS then 10,000 CONTINUATIONs, never ended
    before = backend_requests(c1)
    h = H2(port)
    h.until(lambda f: isinstance(f, hf.SettingsFrame))
    f = h.headers(1, "/cf.jpg")
    f.flags.discard("END_HEADERS")
    try:
        h.frame(f)
        for i in range(0, 10000, 500):
            h.send(b"".join(hf.ContinuationFrame(1, data=b"\x40\x01a\x01b").serialize() for _ in range(500)))
    except (BrokenPipeError, ConnectionResetError):
        pass
    code = h.goaway_code()
    h.close()
    t.check(code == ENHANCE_YOUR_CALM, f"CONTINUATION flood: GOAWAY ENHANCE_YOUR_CALM (got {code})")
    t.check(backend_requests(c1) - before == 0, "CONTINUATION flood: no backend request")

    # a header block of 10,000 fields (each one byte: an indexed entry)
    before = backend_requests(c1)
    h = H2(port)
    h.until(lambda f: isinstance(f, hf.SettingsFrame))
    e = hpack.Encoder()
    head = e.encode([(":method", "GET"), (":scheme", "http"), (":authority", "img.test"), (":path", "/bomb.jpg"),
                     ("x-bomb", "b")])  # x-bomb enters the dynamic table at index 62
    h.enc = e
    blk = head + b"\xbe" * 10000
    f = hf.HeadersFrame(1, data=blk[:16000])
    f.flags.add("END_STREAM")
    h.frame(f)
    c = hf.ContinuationFrame(1, data=blk[16000:])
    c.flags.add("END_HEADERS")
    h.frame(c)
    r = h.responses([1])[1]
    t.check(r[0] == 431 or r[3] not in (None, "end"), f"a header block of 10,000 fields: 431 (got {r[0]}, {r[3]})")
    t.check(backend_requests(c1) - before == 0, "the header bomb: no backend request")
    h.get(3, "/h2/afterbomb.jpg")
    t.check(h.responses([3])[3][0] == 200, "the header bomb is the stream's: the connection goes on")
    h.close()

    # PING, SETTINGS, PRIORITY, empty DATA and unknown-frame floods: glitches
    def flood(name, make, codes=(ENHANCE_YOUR_CALM,), first=None):
        h = H2(port)
        h.until(lambda f: isinstance(f, hf.SettingsFrame))
        if first:
            first(h)
        try:
            for i in range(0, 10000, 500):
                h.send(b"".join(make(h, i + k) for k in range(500)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        code = h.goaway_code()
        h.close()
        names = {ENHANCE_YOUR_CALM: "ENHANCE_YOUR_CALM", PROTOCOL_ERROR: "PROTOCOL_ERROR"}
        t.check(code in codes, f"{name} flood of 10,000: GOAWAY {' or '.join(names[c] for c in codes)} (got {code})")

    flood("PING", lambda h, i: hf.PingFrame(0, opaque_data=struct.pack(">Q", i)).serialize())
    flood("SETTINGS", lambda h, i: hf.SettingsFrame(0, settings={hf.SettingsFrame.ENABLE_PUSH: 0}).serialize())
    flood("PRIORITY", lambda h, i: hf.PriorityFrame(1 + 2 * i, depends_on=0, stream_weight=16).serialize())
    flood("unknown frame", lambda h, i: struct.pack(">I", 4)[1:] + b"\xee\x00" + struct.pack(">I", 0) + b"abcd")
    # RFC 9218 PRIORITY_UPDATE (type 0x10, on stream 0): the prioritized
    # stream's id, then its priority field value. For streams not opened
    # yet nghttp2 keeps idle streams and ends the connection past 100 of
    # them; for a stream that is over, each one is a glitch
    def prio(sid):
        return struct.pack(">I", 7)[1:] + b"\x10\x00" + struct.pack(">I", 0) + struct.pack(">I", sid) + b"u=3"

    def served(h):
        h.get(1, "/h2/prio.jpg")
        h.responses([1])
    flood("PRIORITY_UPDATE (idle streams)", lambda h, i: prio(1 + 2 * i), codes=(ENHANCE_YOUR_CALM, PROTOCOL_ERROR))
    flood("PRIORITY_UPDATE (a stream that is over)", lambda h, i: prio(1), first=served)

    def empty_data(h, i):
        if i == 0:
            return h.headers(1, "/h2/p", method="POST", end_stream=False).serialize()
        return hf.DataFrame(1, data=b"").serialize()
    flood("empty DATA", empty_data)

    # a client that never opens its window: 100 streams, each reset after
    # send_timeout (1 s), and the backends fetched each URL once at most
    before = backend_requests(c1)
    h = H2(port, settings={hf.SettingsFrame.INITIAL_WINDOW_SIZE: 0})
    h.until(lambda f: isinstance(f, hf.SettingsFrame) and "ACK" in f.flags)
    sids = list(range(1, 201, 2))
    h.send(b"".join(h.headers(s, f"/zw/{s}.jpg").serialize() for s in sids))
    t0 = time.monotonic()
    rs = h.responses(sids, timeout=20, window=False)
    took = time.monotonic() - t0
    t.check(all(rs[s][3] == CANCEL for s in sids), f"zero window: all 100 streams reset CANCEL after send_timeout ({took:.1f} s)")
    t.check(backend_requests(c1) - before <= MAX_STREAMS, "zero window: at most 100 backend requests")
    h.get(201, "/h2/afterzw.jpg")
    h.frame(hf.SettingsFrame(0, settings={hf.SettingsFrame.INITIAL_WINDOW_SIZE: 65535}))
    t.check(h.responses([201])[201][0] == 200, "zero window: the connection serves once the window opens")
    h.close()

    st = stats(admin)
    pr = st.get("proxy", st)
    t.check(pr.get("h2c_connections", 0) > 10 and pr.get("h2_streams", 0) > 100, "/stats counts h2c connections and streams")
    t.check(pr.get("h2_goaway_calm", 0) >= 5 and pr.get("h2_glitches", 0) > 0, "/stats counts GOAWAYs by reason and glitches")
    t.check(pr.get("h2_send_timeouts", 0) >= 100, "/stats counts streams reset at send_timeout")

    # the HTTP/1.1 side on the same listener is untouched
    r = harness.get(port, "/h1/after.jpg")
    t.check(r[0] == 200, "HTTP/1.1 on the same listener still served")

    # a coalesced waiter that resets, and one whose connection goes: the
    # fetch goes on for the leader, once at the backend
    before = backend_requests(c1)
    a, b, c = H2(port), H2(port), H2(port)
    a.get(1, "/h2/co.jpg?delay=800")
    time.sleep(0.2)
    b.get(1, "/h2/co.jpg?delay=800")
    c.get(1, "/h2/co.jpg?delay=800")
    time.sleep(0.2)
    b.frame(hf.RstStreamFrame(1, error_code=CANCEL))
    c.close()
    ra = a.responses([1])[1]
    b.get(3, "/h2/co.jpg?delay=800")
    rb = b.responses([3])[3]
    a.close()
    b.close()
    t.check(ra[0] == 200 and ra[2] == harness.body_for("/h2/co.jpg?delay=800") and rb[0] == 200,
            "coalesced waiters that reset or leave: the leader is answered, the reset one's connection goes on")
    t.check(backend_requests(c1) - before == 1, "coalesced: one backend request for the three")

    # ---- max_requests, idle timeout, h2c off, graceful stop -----------
    t.check(p.stop() == 0, "the proxy stops cleanly after all of it")
    conf2 = conf.replace("max_requests = 1000", "max_requests = 3\nidle_timeout = 1s").replace(
        "[proxy]\n", "[proxy]\nclient_timeout = 2s\n")
    p = harness.Proxy(RP, conf2, "h2b")
    h = H2(p.port)
    h.send(b"".join(h.headers(s, f"/mr/{s}.jpg").serialize() for s in (1, 3, 5, 7)))
    rs = h.responses([1, 3, 5, 7], timeout=10)
    ga = getattr(h, "goaway", None)
    t.check(ga is not None and ga.error_code == NO_ERROR and ga.last_stream_id == 5,
         f"max_requests = 3: GOAWAY NO_ERROR last stream 5 (got {ga and (ga.error_code, ga.last_stream_id)})")
    t.check(all(rs[s][0] == 200 for s in (1, 3, 5)) and rs[7][0] is None, "the three are served, the fourth is not")
    h.close()
    h = H2(p.port)
    t0 = time.monotonic()
    code = h.goaway_code(timeout=10)
    t.check(code == NO_ERROR and time.monotonic() - t0 < 5, f"idle_timeout = 1s: GOAWAY NO_ERROR (got {code})")
    h.close()
    # a request body that stalls (client_timeout = 2s here): its stream is reset, as a
    # stalled HTTP/1.1 upload closes its connection, and the backend connection it held
    # goes; a body that comes a byte every 0.7 s is slow, not stalled, and is served
    h = H2(p.port)
    h.until(lambda f: isinstance(f, hf.SettingsFrame))
    h.frame(h.headers(1, "/bs/1.jpg", method="POST", extra=[("content-length", "100")], end_stream=False))
    h.frame(h.headers(3, "/bs/3.jpg", method="POST", extra=[("content-length", "5")], end_stream=False))
    t0 = time.monotonic()
    for i in range(5):
        time.sleep(0.7)
        h.frame(hf.DataFrame(3, data=b"x", flags=["END_STREAM"] if i == 4 else []))
    rs = h.responses([1, 3], timeout=10)
    h.close()
    t.check(rs[1][3] == CANCEL and rs[3][0] == 200 and rs[3][1].get("x-body-length") == "5",
            "a request body stalled for client_timeout: RST_STREAM CANCEL; one a byte every 0.7 s "
            "for 3.5 s: served", (rs, time.monotonic() - t0))
    pr = stats(p.admin_port())
    pr = pr.get("proxy", pr)
    t.check(pr.get("h2_body_timeouts") == 1, "h2_body_timeouts counts the stalled body", pr.get("h2_body_timeouts"))
    # graceful stop: a stream in flight finishes, GOAWAY names it
    h = H2(p.port)
    h.get(1, "/h2/slowstop.jpg?delay=1000")
    time.sleep(0.3)
    p.signal(signal.SIGTERM)
    rs = h.responses([1], timeout=10)
    ga = getattr(h, "goaway", None)
    t.check(rs[1][0] == 200 and rs[1][3] == "end", "graceful stop: the open stream finishes")
    t.check(ga is not None and ga.last_stream_id == 1, "graceful stop: GOAWAY with the last stream id")
    h.close()
    harness.stop_pid(p.proc)

    conf3 = conf.replace("[proxy]\n", "[proxy]\nh2c = off\n")
    p = harness.Proxy(RP, conf3, "h2c")
    s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
    s.sendall(PREFACE + hf.SettingsFrame(0).serialize())
    d = s.recv(4096)
    s.close()
    t.check(d.startswith(b"HTTP/1.1 505"), "h2c = off: the preface gets 505")
    harness.stop_pid(p.proc)

    # behind a TLS terminator that sends a PROXY header (hitch with
    # alpn-protos "h2, http/1.1"): the preface after the header is h2c
    conf4 = conf.replace("[proxy]\n", "[proxy]\nproxy_protocol = on\nproxy_protocol_from = 127.0.0.1\n")
    p = harness.Proxy(RP, conf4, "h2pp")
    h = H2(p.port, preface=False)
    h.send(b"PROXY TCP4 10.1.2.3 127.0.0.1 40000 443\r\n" + PREFACE + hf.SettingsFrame(0).serialize())
    h.get(1, "/h2/pp.jpg")
    r = h.responses([1])[1]
    h.close()
    t.check(r[0] == 200 and r[1].get("x-echo-x-forwarded-for") == "10.1.2.3",
            "PROXY header then the preface: HTTP/2, the client's address from the header")
    harness.stop_pid(p.proc)

    # a backend's head of 70 fields (more than h2_req_head keeps on its
    # stack), names in mixed case, with a field its Connection names and
    # an interim 103 before it: all of its own fields relayed, lowercased,
    # in order; the connection's and the framing left out; the 103 goes
    # before it as a HEADERS frame of its own (browsers act on Early Hints
    # over HTTP/2 only)
    many = [(f"X-Many-{i:02d}", f"v{i}") for i in range(70)]
    head = (b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\n" +
            b"".join(f"{k}: {v}\r\n".encode() for k, v in many) +
            b"Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")

    def many_fields(fake, sock, n):
        for _ in fake.requests(sock):
            sock.sendall(head)

    fake = harness.Fake(many_fields)
    p = harness.Proxy(RP, harness.conf_text([("fake", fake.port)], proxy={"workers": 1}), "h2many")
    h = H2(p.port)
    h.get(1, "/h2/many-fields")
    r = h.responses([1])[1]
    heads = h.heads.get(1, [])
    h.close()
    got = [(k, v) for k, v in r[1].items() if k.startswith("x-many-")]
    t.check(r[0] == 200 and r[2] == b"hello" and got == [(k.lower(), v) for k, v in many] and
            "x-secret" not in r[1] and "connection" not in r[1] and "transfer-encoding" not in r[1] and
            "link" not in r[1] and r[1].get("content-type") == "text/plain",
            f"70 fields from the backend: all relayed in order, lowercased; the connection's not, nor the 103's "
            f"(got {r[0]}, {len(got)} of them, {sorted(k for k in r[1] if not k.startswith('x-many-'))})")
    t.check([st for st, _ in heads] == [103, 200] and
            heads[0][1] == {":status": "103", "link": "</a.css>; rel=preload"},
            "the backend's 103 Early Hints: a HEADERS frame of its own before the 200's, its Link field with it",
            heads[:1])
    harness.stop_pid(p.proc)
    fake.stop()

    # ---- real clients -------------------------------------------------------
    p = harness.Proxy(RP, conf, "h2d")
    curl = shutil.which("curl")
    if curl:
        out = subprocess.run([curl, "-s", "--http2-prior-knowledge", "-o", "-", "-w", "%{http_version}",
                              f"http://127.0.0.1:{p.port}/curl/a.jpg"], capture_output=True, timeout=30)
        t.check(out.stdout.endswith(b"2") and out.stdout[:-1] == harness.body_for("/curl/a.jpg"),
             "curl --http2-prior-knowledge: HTTP/2, the body")
    nghttp = shutil.which("nghttp")
    if nghttp:
        urls = [f"http://127.0.0.1:{p.port}/ng/{i}.jpg" for i in range(60)]
        out = subprocess.run([nghttp, "-n", "-s", "-m", "1", *urls], capture_output=True, timeout=60, text=True)
        t.check(out.returncode == 0 and out.stdout.count(" 200 ") == 60, "nghttp: 60 streams, 60 200s")
        out = subprocess.run([nghttp, "-n", "-s", "-w", "10", "-W", "16",
                              f"http://127.0.0.1:{p.port}/ng/big.jpg?size=2000000"],
                             capture_output=True, timeout=60, text=True)
        t.check(out.returncode == 0 and re.search(r" 200 +1M /ng/big", out.stdout) is not None,
             "nghttp: 2 MB under a 1 KiB stream window")
        dfile = harness.write("ng.post", "x" * 100000)
        out = subprocess.run([nghttp, "-n", "-s", "-d", dfile, f"http://127.0.0.1:{p.port}/ng/post"],
                             capture_output=True, timeout=60, text=True)
        t.check(out.returncode == 0 and " 200 " in out.stdout and "97K" in out.stdout, "nghttp: a POST of 100 kB, echoed")
    harness.stop_pid(p.proc)


harness.run_main(t, main)
