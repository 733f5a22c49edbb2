#!/usr/bin/env python3
"""test_smuggling.py -- requests whose framing two parsers could read two
ways, sent over raw sockets: each must get a 400 (501 for a coding we do
not decode) and a closed connection, and the cache must never see a
request -- neither the outer one nor one smuggled in its body.
usage: test_smuggling.py RINGPROXY TESTCACHE"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import raw  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
CASES = [
    ("CL.TE: Content-Length and Transfer-Encoding: chunked",
     b"POST /s/clte HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
     % (5 + len(SMUGGLED)) + b"0\r\n\r\n" + SMUGGLED, 400),
    ("TE.CL: Transfer-Encoding: chunked before Content-Length",
     b"POST /s/tecl HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
     b"%x\r\n" % (len(SMUGGLED) + 2) + b"xx" + SMUGGLED + b"\r\n0\r\n\r\n", 400),
    ("Transfer-Encoding: xchunked",
     b"POST /s/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + SMUGGLED, 400),
    ("Transfer-Encoding: chunked, identity (chunked not last)",
     b"POST /s/ci HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + SMUGGLED, 400),
    ("two Transfer-Encoding lines, the second not chunked",
     b"POST /s/tete HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n"
     b"0\r\n\r\n" + SMUGGLED, 400),
    ("duplicate differing Content-Length",
     b"POST /s/cl2 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: %d\r\n\r\n"
     % len(SMUGGLED) + SMUGGLED, 400),
    ("Content-Length list with differing values",
     b"POST /s/cll HTTP/1.1\r\nHost: x\r\nContent-Length: 0, %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED, 400),
    ("Content-Length with a sign",
     b"POST /s/cls HTTP/1.1\r\nHost: x\r\nContent-Length: +%d\r\n\r\n" % len(SMUGGLED) + SMUGGLED, 400),
    ("whitespace before the colon of Transfer-Encoding",
     b"POST /s/ws HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n"
     b"0\r\n\r\n" + SMUGGLED, 400),
    ("an obs-folded Transfer-Encoding",
     b"POST /s/fold HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: x\r\n chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, 400),
    ("a bare LF line end",
     b"GET /s/lf HTTP/1.1\nHost: x\n\n" + SMUGGLED, 400),
    ("a chunk size that overflows 64 bits",
     b"POST /s/ovf HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"10000000000000001\r\nx\r\n0\r\n\r\n" + SMUGGLED, 400),
    ("a chunk size with a sign",
     b"POST /s/neg HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nx\r\n0\r\n\r\n" + SMUGGLED,
     400),
    ("Content-Length: 18446744073709551615 (above 2^63-1, issue 9)",
     b"POST /s/huge HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551615\r\n\r\n" + SMUGGLED, 400),
    ("Content-Length: 9223372036854775808 (2^63)",
     b"POST /s/2p63 HTTP/1.1\r\nHost: x\r\nContent-Length: 9223372036854775808\r\n\r\n" + SMUGGLED, 400),
    ("a chunk size of 2^63",
     b"POST /s/ck63 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n8000000000000000\r\nx\r\n0\r\n\r\n"
     + SMUGGLED, 400),
    ("gzip, chunked: a coding the proxy does not decode",
     b"POST /s/gz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, 501),
]

caches = [harness.Cache(TC, "s1"), harness.Cache(TC, "s2")]
try:
    proxy = harness.Proxy(RP, harness.conf_text(caches), "smuggling")
    for what, data, want in CASES:
        for c in caches:
            c.reset()
        try:
            rs, rd = raw(proxy.port, data, timeout=10)
            r = rs[0]
            closed = rd.closed(5)
            rd.s.close()
        except Exception as e:
            r, closed = None, repr(e)
        seen = sum(c.stats()["requests"] for c in caches)
        t.check(r is not None and r.status == want and closed is True,
                f"{what}: {want}, connection closed", None if r is None else [r.status, r.body, closed])
        t.check(seen == 0, f"{what}: the cache saw no request", seen)

    # a chunked body whose chunk data is malformed after the head was
    # forwarded: the cache must not see what follows as a request
    for c in caches:
        c.reset()
    data = (b"POST /s/late HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabcXX\r\n0\r\n\r\n" + SMUGGLED)
    try:
        rs, rd = raw(proxy.port, data, timeout=10)
        status = rs[0].status
        closed = rd.closed(5)
    except (EOFError, ConnectionResetError):
        status, closed = None, True
    seen = [c.stats() for c in caches]
    t.check(status in (400, 502, None) and closed is True,
            "a malformed chunk after the head went out: an error or a close, then closed", status)
    t.check(sum(s["requests"] for s in seen) <= 1 and
            not any("smuggled" in str(s) for s in seen),
            "... and at most the outer request reached a cache", seen)

    st, h, body = proxy.get("/s/fine")
    t.check(st == 200, "a good request is served after all of them")
    t.check(proxy.stop() == 0, "SIGTERM: exit 0")
finally:
    for c in caches:
        c.stop()
t.done()
