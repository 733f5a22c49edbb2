#!/usr/bin/env python3
"""test_proxyproto.py -- [proxy] proxy_protocol = on behind a balancer:
a PROXY header (v1 or v2) from a proxy_protocol_from source names the
client, and that address is the one X-Forwarded-For (testcache echoes
it), the access log, [cache] purge_allow and the log line of a reply of
the proxy's own show; the request bytes after the header in the same
segment are served, a header in pieces waits for its rest. Refused, with
one log line saying what and from where, and closed: a header from a
source not in the list, no header from one in it, garbage, a v1 line
over 107 bytes, a truncated v2 block (at EOF, and at client_timeout:
never a hang). A source not in the list is served without a header.
With proxy_protocol = off (a reload) a header is only a bad request.
Then the real peer: Debian's haproxy in TCP mode with send-proxy and
send-proxy-v2 in front of ringproxy; a client through it shows its own
address in the access log and in the X-Forwarded-For the backend saw.
Sources are loopback addresses of their own (127.0.0.2 is the balancer).
usage: test_proxyproto.py RINGPROXY TESTCACHE"""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
HAPROXY = shutil.which("haproxy", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")

LB = "127.0.0.2"        # the balancer: in proxy_protocol_from
OTHER = "127.0.0.1"     # a client the proxy sees directly
SIG2 = b"\r\n\r\n\x00\r\nQUIT\n"
GET = b"GET /pp/%d HTTP/1.1\r\nHost: img.test\r\nUser-Agent: pp-%d\r\n\r\n"


def v1(src, dst="127.0.0.1", sport=40000, dport=8080):
    fam = "TCP6" if ":" in src else "TCP4"
    return f"PROXY {fam} {src} {dst} {sport} {dport}\r\n".encode()


def v2(src, dst, sport=40000, dport=8080, tlv=b""):
    if ":" in src:
        addrs = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
        fam = 0x21
    else:
        addrs = socket.inet_aton(src) + socket.inet_aton(dst)
        fam = 0x11
    block = addrs + struct.pack(">HH", sport, dport) + tlv
    return SIG2 + bytes([0x21, fam]) + struct.pack(">H", len(block)) + block


def conn(port, src):
    """A connection to the proxy from the loopback address src."""
    s = socket.socket()
    s.settimeout(10)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def exchange(port, src, pieces, n=1, pause=0.0):
    """Send pieces (with pause s between them) from src, read n responses:
    (responses, closed_at_once) -- closed when the proxy closed without
    a response."""
    s = conn(port, src)
    try:
        for i, p in enumerate(pieces):
            if i and pause:
                time.sleep(pause)
            s.sendall(p)
        rd = harness.Reader(s)
        out = []
        try:
            while len(out) < n:
                r = rd.response()
                if r.status >= 200:
                    out.append(r)
        except (EOFError, ConnectionResetError):
            return out, True
        return out, False
    finally:
        s.close()


def refused(port, src, data, shut=False):
    """Send data from src (then half-close when shut); True when the proxy
    closes the connection without a byte of answer within 10 s."""
    s = conn(port, src)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        try:
            return s.recv(65536) == b""
        except ConnectionResetError:
            return True
        except (socket.timeout, TimeoutError):
            return False
    finally:
        s.close()


def access_lines(path, want, timeout=5):
    """The access log's lines once every one of want (substrings) is in
    it, or what it has after timeout."""
    return harness.lines_until(path, lambda got: all(any(w in x for x in got) for w in want), timeout)


def client_of(lines, ua):
    """The client field of the access log line of the request sent with
    User-Agent ua (the first field of a combined line)."""
    for x in lines:
        if f'"{ua}"' in x:
            return x.split(" ", 1)[0]
    return None


def xff(r):
    return r.h("X-Echo-X-Forwarded-For") if r else None


def main():
    cache = harness.Cache(TC, "c1")
    log = harness.tmp_path(f"pp-access.{time.monotonic_ns()}.log")
    conf = harness.conf_text([cache], proxy={"proxy_protocol": "on", "proxy_protocol_from": f"{LB}, 10.0.0.0/8",
                                             "client_timeout": "1s", "admin_listen": "127.0.0.1:0"},
                             cache={"size": 0, "purge_allow": "192.0.2.0/24"})
    conf += f"\n[log]\naccess = {log}\n"
    path = harness.write("pp.ini", conf)
    proxy = harness.Proxy(RP, path=path)
    P = proxy.port
    aport = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    def stats():
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{aport}/stats", timeout=10).read())

    # ---- the header names the client ------------------------------------------
    rs, _ = exchange(P, LB, [v1("192.0.2.7") + GET % (1, 1)])
    t.check(len(rs) == 1 and rs[0].status == 200 and xff(rs[0]) == "192.0.2.7",
            "v1 TCP4 from the balancer, the request in the same segment: 200, X-Forwarded-For 192.0.2.7",
            rs and rs[0].headers)
    rs, _ = exchange(P, LB, [v2("2001:db8::5", "::1", tlv=b"\x04\x00\x02zz") + GET % (2, 2)])
    t.check(len(rs) == 1 and rs[0].status == 200 and xff(rs[0]) == "2001:db8::5",
            "v2 TCP over IPv6 with a TLV: X-Forwarded-For 2001:db8::5", rs and rs[0].headers)
    rs, _ = exchange(P, LB, [v2("192.0.2.14", "127.0.0.1", tlv=b"\xea\x17\x70" + b"t" * 6000) + GET % (13, 13)])
    t.check(len(rs) == 1 and rs[0].status == 200 and xff(rs[0]) == "192.0.2.14",
            "a v2 header of 6,031 bytes (a 6,000-byte TLV), larger than a connection's first 4 KB buffer: "
            "X-Forwarded-For 192.0.2.14", rs and rs[0].headers)
    rs, _ = exchange(P, LB, [v1("2001:db8::6", "::1") + GET % (3, 3)])
    t.check(len(rs) == 1 and xff(rs[0]) == "2001:db8::6", "v1 TCP6: X-Forwarded-For 2001:db8::6",
            rs and rs[0].headers)
    rs, _ = exchange(P, LB, [SIG2 + b"\x20\x00\x00\x00" + GET % (4, 4)])
    t.check(len(rs) == 1 and xff(rs[0]) == LB,
            "v2 LOCAL (a balancer's own check): the connection's address stands", rs and rs[0].headers)
    rs, _ = exchange(P, LB, [b"PROXY UNKNOWN\r\n" + GET % (5, 5)])
    t.check(len(rs) == 1 and xff(rs[0]) == LB, "v1 UNKNOWN: the connection's address stands",
            rs and rs[0].headers)
    h, g = v2("198.51.100.20", "127.0.0.1"), GET % (6, 6)
    rs, _ = exchange(P, LB, [h[:5], h[5:14], h[14:] + g[:10], g[10:]], pause=0.1)
    t.check(len(rs) == 1 and rs[0].status == 200 and xff(rs[0]) == "198.51.100.20",
            "a v2 header and its request in four pieces 0.1 s apart: served, X-Forwarded-For 198.51.100.20",
            rs and rs[0].headers)
    rs, _ = exchange(P, LB, [v1("192.0.2.8") + GET % (7, 7) + GET % (8, 8)], n=2)
    t.check(len(rs) == 2 and all(r.status == 200 and xff(r) == "192.0.2.8" for r in rs),
            "two pipelined requests after the header, one segment: both answered for 192.0.2.8",
            [r.headers for r in rs])
    body = bytes(range(256)) * 800
    post = b"POST /pp/up HTTP/1.1\r\nHost: img.test\r\nContent-Length: %d\r\n\r\n" % len(body)
    rs, _ = exchange(P, LB, [v1("192.0.2.13") + post + body[:1000], body[1000:]])
    t.check(len(rs) == 1 and rs[0].status == 200 and rs[0].body == body and xff(rs[0]) == "192.0.2.13",
            "a POST of 204,800 bytes after the header, its head in the header's segment: the body echoed intact",
            rs and (rs[0].status, len(rs[0].body)))
    rs, _ = exchange(P, OTHER, [GET % (9, 9)])
    t.check(len(rs) == 1 and rs[0].status == 200 and xff(rs[0]) == OTHER,
            "a source not in proxy_protocol_from is served without a header, as itself", rs and rs[0].headers)
    lines = access_lines(log, ['"pp-1"', '"pp-2"', '"pp-3"', '"pp-4"', '"pp-9"'])
    got = {ua: client_of(lines, ua) for ua in ("pp-1", "pp-2", "pp-3", "pp-4", "pp-8", "pp-9")}
    t.check(got == {"pp-1": "192.0.2.7", "pp-2": "2001:db8::5", "pp-3": "2001:db8::6", "pp-4": LB,
                    "pp-8": "192.0.2.8", "pp-9": OTHER},
            "the access log's client is the header's source (the connection's own for LOCAL and a direct client)",
            f"{got}\n" + "\n".join(lines))

    # ---- purge_allow and the log line of a reply of the proxy's own ----------
    purge = b"PURGE /pp/1 HTTP/1.1\r\nHost: img.test\r\n\r\n"
    rs, _ = exchange(P, LB, [v1("192.0.2.9") + purge])
    t.check(len(rs) == 1 and rs[0].status != 405 and rs[0].h("X-Ringproxy-Backend") == "c1",
            "PURGE for a header's client in purge_allow (192.0.2.0/24): forwarded to the backend",
            rs and (rs[0].status, rs[0].headers))
    rs, _ = exchange(P, LB, [v1("203.0.113.9") + purge])
    rs2, _ = exchange(P, OTHER, [purge])
    t.check(len(rs) == 1 and rs[0].status == 405 and len(rs2) == 1 and rs2[0].status == 405,
            "PURGE for a header's client outside purge_allow, and from a direct client: 405",
            (rs and rs[0].status, rs2 and rs2[0].status))
    since = proxy.log_size()
    rs, _ = exchange(P, LB, [v1("192.0.2.10") + b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"])
    rid = harness.request_id(rs[0].body) if rs else None
    m = proxy.wait_log(rf"request {rid}: 400 for GET /x from ([^:\s]+):", 5, since) if rid else None
    t.check(rs and rs[0].status == 400 and m and m.group(1) == "192.0.2.10",
            "a bad request after a header: 400, and its request id's log line names 192.0.2.10",
            proxy.log()[since:])

    # ---- refusals: one log line each, the connection closed --------------------
    cases = [
        ("a v1 header from a source not in proxy_protocol_from", OTHER, v1("192.0.2.66") + GET % (20, 20),
         False, rf"from {OTHER}: a PROXY header from a source not in proxy_protocol_from"),
        ("a v2 header from a source not in proxy_protocol_from", OTHER, v2("192.0.2.66", "127.0.0.1") + GET % (21, 21),
         False, rf"from {OTHER}: a PROXY header from a source not in proxy_protocol_from"),
        ("no header from the balancer", LB, GET % (22, 22), False,
         rf"from {LB}: no PROXY header: the connection does not begin with \"PROXY \""),
        ("garbage from the balancer (a TLS hello)", LB, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", False,
         rf"from {LB}: no PROXY header"),
        ("a v1 line over 107 bytes", LB, b"PROXY UNKNOWN " + b"f" * 100 + b"\r\n", False,
         rf"from {LB}: v1: no CRLF within the first 107 bytes \(116 bytes received\)"),
        ("a bad v1 address", LB, b"PROXY TCP4 192.0.2.077 127.0.0.1 1 2\r\n" + GET % (23, 23), False,
         rf"from {LB}: v1: the source is not an IPv4 address \(TCP4\)"),
        ("a v2 block of version 3", LB, SIG2 + b"\x31\x11\x00\x0c" + b"\x00" * 12, False,
         rf"from {LB}: v2: the version is not 2"),
        ("a v2 header of 65,551 bytes, longer than buffer_size (64k)", LB, SIG2 + b"\x21\x11\xff\xff" + b"\x00" * 12,
         False, rf"from {LB}: v2: the header is longer than the read buffer \(\[proxy\] buffer_size\)"),
        ("a truncated v2 block, then EOF", LB, v2("192.0.2.67", "127.0.0.1")[:20], True,
         rf"from {LB}: the connection ended inside the PROXY header \(20 bytes received\)"),
    ]
    for what, src, data, shut, pattern in cases:
        since = proxy.log_size()
        closed = refused(P, src, data, shut)
        m = proxy.wait_log(r"warn: PROXY protocol: closed the connection " + pattern, 5, since)
        t.check(closed and m, f"{what}: closed without an answer, and logged", proxy.log()[since:] or "(nothing logged)")
    lines = access_lines(log, ['"pp-20"', '"pp-21"', '"pp-22"', '"pp-23"'], timeout=1)
    t.check(not any(client_of(lines, f"pp-{i}") for i in (20, 21, 22, 23)),
            "none of the refused connections' requests was served (no access log line)")

    since = proxy.log_size()
    s = conn(P, LB)
    t0 = time.monotonic()
    s.sendall(v2("192.0.2.68", "127.0.0.1")[:20])
    try:
        end = s.recv(100)
    except (ConnectionResetError, socket.timeout, TimeoutError):
        end = None
    took = time.monotonic() - t0
    s.close()
    m = proxy.wait_log(rf"closed the connection from {LB}: the PROXY header was not complete within client_timeout "
                       r"\(20 bytes received\)", 5, since)
    t.check(end == b"" and took < 5 and m,
            f"a truncated v2 block that stays open: closed at client_timeout (1s) and logged, after {took:.1f}s",
            proxy.log()[since:])
    s = conn(P, LB)
    s.close()
    rs, _ = exchange(P, LB, [v1("192.0.2.11") + GET % (10, 10)])
    t.check(len(rs) == 1 and xff(rs[0]) == "192.0.2.11", "the proxy serves on after every refusal")
    n = stats().get("proxy_protocol_refused")
    t.check(n == len(cases) + 1, f"/stats proxy_protocol_refused counts the {len(cases) + 1} refusals "
            "(not the connection that sent nothing)", n)

    # ---- off (a reload): a header is a bad request, nothing more ---------------
    harness.write("pp.ini", conf.replace("proxy_protocol = on", "proxy_protocol = off"))
    line = proxy.reload()
    rs, _ = exchange(P, LB, [v1("192.0.2.12") + GET % (11, 11)])
    rs2, _ = exchange(P, LB, [GET % (12, 12)])
    t.check(line and line.startswith("reload") and "failed" not in line and rs and rs[0].status == 400 and
            len(rs2) == 1 and xff(rs2[0]) == LB,
            "after a reload to proxy_protocol = off: a header is a 400, a plain request is served as the balancer",
            (line, rs and rs[0].status, rs2 and rs2[0].headers))
    harness.write("pp.ini", conf)
    proxy.reload()

    # ---- the real peer: haproxy's send-proxy and send-proxy-v2 ------------------
    if not HAPROXY:
        t.skip("haproxy send-proxy and send-proxy-v2 in front", "no haproxy")
        proxy.stop()
        return
    ports = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        ports.append(s)
    p1, p2 = (x.getsockname()[1] for x in ports)
    for x in ports:
        x.close()
    hcfg = harness.write("haproxy.cfg", f"""# an L4 balancer in front of ringproxy
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
listen v1
    bind 127.0.0.1:{p1}
    server rp 127.0.0.1:{P} send-proxy source {LB}
listen v2
    bind 127.0.0.1:{p2}
    server rp 127.0.0.1:{P} send-proxy-v2 source {LB}
""")
    hlog = open(harness.tmp_path("haproxy.log"), "wb")
    hp = subprocess.Popen([HAPROXY, "-db", "-f", hcfg], stdin=subprocess.DEVNULL, stdout=hlog, stderr=hlog)
    harness._procs.append(hp)

    def listening():
        try:
            for p in (p1, p2):
                socket.create_connection(("127.0.0.1", p), timeout=1).close()
            return True
        except OSError:
            return False
    up = harness.wait_until(listening, 10)
    t.check(up, "haproxy listens", open(hlog.name, "rb").read().decode("utf-8", "replace"))
    seen = {}
    for port, src, ua in ((p1, "127.0.0.7", "hap-1"), (p2, "127.0.0.8", "hap-2")):
        ua_n = int(ua[-1])
        rs, _ = exchange(port, src, [(GET % (100 + ua_n, 0)).replace(b"pp-0", ua.encode())])
        seen[ua] = (src, rs[0].status if rs else None, xff(rs[0]) if rs else None)
    lines = access_lines(log, ['"hap-1"', '"hap-2"'])
    for ua, how in (("hap-1", "send-proxy (v1)"), ("hap-2", "send-proxy-v2")):
        src, st, fwd = seen[ua]
        t.check(st == 200 and fwd == src and client_of(lines, ua) == src,
                f"through haproxy's {how} from {src}: X-Forwarded-For and the access log say {src}",
                f"{seen[ua]} log client {client_of(lines, ua)}")
    harness.stop_pid(hp)
    proxy.stop()


harness.run_main(t, main)
