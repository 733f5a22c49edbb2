#!/usr/bin/env python3
"""test_h2tls.py -- HTTP/2 over ringproxy's own TLS ([tls] alpn, default
"h2, http/1.1"), with real clients: curl --http2 negotiates h2 by ALPN
and gets the response (curl's http_version 2, X-Forwarded-Proto https,
the access log's TLS fields and stream); nghttp sends many concurrent
streams, a HEAD and a POST with a body over one TLS connection; h2load
makes a bounded run (2,000 requests, 4 connections, 10 streams each),
every response 2xx; a client offering only http/1.1 (curl --http1.1,
Python's ssl with ALPN http/1.1, a client with no ALPN) speaks HTTP/1.1;
a listener configured with alpn = http/1.1 never picks h2; -t refuses
a protocol this build does not serve; a session of an h2 connection
resumes from its ticket with h2 again. The counters: h2_connections
counts the ALPN h2 connections, tls_conns goes back to 0; requests and
connections split by protocol (h1_requests, h1_connections, h2_streams,
h2c_streams, h2_connections, h2c_connections) in /stats, /metrics and
the page, after a known mix of each. Then Rapid
Reset over TLS (1,000 HEADERS+RST_STREAM pairs with python3-h2's frames
in a TLS socket): the connection ends or its streams are refused, the
backend gets at most max_concurrent_streams requests, and another client
is served. A stop with an HTTP/2 connection open over TLS sends it GOAWAY
and exits cleanly.
usage: test_h2tls.py RINGPROXY TESTCACHE"""

import json
import os
import re
import shutil
import socket
import ssl
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
CURL = shutil.which("curl")
NGHTTP = shutil.which("nghttp")
H2LOAD = shutil.which("h2load")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def make_cert(d):
    """A self-signed ECDSA P-256 certificate for localhost and 127.0.0.1
    with its key, in d/10-local.pem; (pem, crt)."""
    os.makedirs(d, exist_ok=True)
    k, c = os.path.join(d, "local.key"), os.path.join(d, "local.crt")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", k, "-out", c, "-days", "30", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    p = os.path.join(d, "10-local.pem")
    with open(p, "w") as f:
        f.write(open(c).read() + open(k).read())
    return p, c


def curl(port, path, *extra):
    """curl https://localhost:PORT/path (resolved to 127.0.0.1, the
    certificate not verified): (exit code, headers and -w text)."""
    r = subprocess.run([CURL, "-sS", "-k", "--max-time", "20", "--resolve", f"localhost:{port}:127.0.0.1",
                        "-D", "-", "-o", "/dev/null", *extra, f"https://localhost:{port}{path}"],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


def tls_sock(port, alpn=None):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(s, server_hostname="localhost")


def rapid_reset(port, pairs):
    """HEADERS+RST_STREAM pairs over one TLS connection (ALPN h2): how
    it ended (GOAWAY's error code, or None)."""
    s = tls_sock(port, ["h2"])
    if s.selected_alpn_protocol() != "h2":
        return "no h2"
    enc = hpack.Encoder()
    out = bytearray(PREFACE + hf.SettingsFrame(0).serialize())
    for i in range(pairs):
        sid = 2 * i + 1
        hdr = hf.HeadersFrame(sid)
        hdr.data = enc.encode([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"),
                               (":path", f"/rr/{i}")])
        hdr.flags.add("END_HEADERS")
        hdr.flags.add("END_STREAM")
        rst = hf.RstStreamFrame(sid)
        rst.error_code = 8
        out += hdr.serialize() + rst.serialize()
    goaway = None
    try:
        s.sendall(bytes(out))
    except OSError:
        pass
    buf = b""
    deadline = time.monotonic() + 15
    s.settimeout(2)
    while time.monotonic() < deadline and goaway is None:
        try:
            d = s.recv(65536)
        except (socket.timeout, OSError):
            break
        if not d:
            break
        buf += d
        while len(buf) >= 9:
            ln = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + ln:
                break
            if buf[3] == 0x7:
                goaway = int.from_bytes(buf[13:17], "big")
            buf = buf[9 + ln:]
    s.close()
    return goaway


def main():
    cache = harness.Cache(TC, "c1")
    d = harness.tmp_path("h2tls-certs")
    pem, crt = make_cert(d)
    alog = harness.tmp_path("h2tls-access.log")
    conf = harness.conf_text([cache], proxy={"admin_listen": "127.0.0.1:0"}, cache={"size": "16m"})
    conf += f"\n[tls]\nlisten = 127.0.0.1:0\ncerts = {d}/*.pem\n\n[log]\naccess = {alog}\n"
    proxy = harness.Proxy(RP, conf, tag="h2tls")
    P = int(proxy.wait_log(r"listening for HTTPS on 127\.0\.0\.1:(\d+)", 10).group(1))
    aport = proxy.admin_port()

    def stats():
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{aport}/stats", timeout=10).read())

    before = stats()
    # ---- curl --http2 ----------------------------------------------------------------
    rc, out = curl(P, "/a/1", "--http2", "-w", "v=%{http_version}\n")
    t.check(rc == 0 and out.startswith("HTTP/2 200") and "v=2" in out and
            "x-echo-x-forwarded-proto: https" in out,
            "curl --http2 over https: ALPN h2, HTTP/2 200, http_version 2, X-Forwarded-Proto: https", out)
    rc, out = curl(P, "/a/1", "--http2", "-v")
    t.check(rc == 0 and "ALPN: server accepted h2" in out,
            "the default [tls] alpn (h2, http/1.1): the server accepts h2 when the client offers it", out)
    got = harness.wait_until(lambda: "stream=" in open(alog).read(), 5)
    line = [x for x in open(alog).read().splitlines() if "/a/1" in x]
    t.check(got and line and "HTTP/2" in line[0] and "stream=1" in line[0] and "tls=TLSv1.3" in line[0]
            and "sni=localhost" in line[0],
            "the access log: HTTP/2, the stream and the TLS fields (version, SNI) on one line", line)

    # ---- resumption: TLS 1.3 tickets go out after the handshake, h2's SETTINGS with them ----
    sess = harness.tmp_path("h2tls.sess")
    outs = []
    for inout in (["-sess_out", sess], ["-sess_in", sess]):
        p = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{P}", "-servername", "localhost",
                              "-alpn", "h2", *inout], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        time.sleep(1)   # the tickets arrive after the handshake: read them
        outs.append(p.communicate("", timeout=20)[0])
    t.check("New, TLSv1.3" in outs[0] and "Reused, TLSv1.3" in outs[1] and
            all("ALPN protocol: h2" in o for o in outs),
            "a session from a ticket of an h2 connection resumes, ALPN h2 again (openssl s_client -sess_out/-sess_in)",
            [re.findall(r"(?:New|Reused),.*|ALPN.*", o) for o in outs])

    # ---- HTTP/1.1 clients --------------------------------------------------------------
    rc, out = curl(P, "/a/2", "--http1.1", "-w", "v=%{http_version}\n")
    t.check(rc == 0 and out.startswith("HTTP/1.1 200") and "v=1.1" in out,
            "curl --http1.1 (ALPN http/1.1 only): HTTP/1.1", out)
    for alpn in (["http/1.1"], None):
        s = tls_sock(P, alpn)
        s.sendall(b"GET /a/3 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = harness.Reader(s).response()
        sel = s.selected_alpn_protocol()
        s.close()
        t.check(r.status == 200 and sel == (alpn[0] if alpn else None),
                f"a client offering {alpn or 'no ALPN'}: ALPN {sel}, served HTTP/1.1", (sel, r.status))

    # ---- nghttp: many streams, HEAD, POST ----------------------------------------------
    if NGHTTP:
        urls = [f"https://127.0.0.1:{P}/n/{i}" for i in range(50)]
        r = subprocess.run([NGHTTP, "-n", "-s", "-m", "1", "-t", "20", *urls], capture_output=True,
                           text=True, timeout=60)
        rows = re.findall(r"^\s*(\d+)\s+\S+\s+\S+\s+\S+\s+(\d{3})\s", r.stdout, re.M)
        t.check(r.returncode == 0 and len(rows) == 50 and all(st == "200" for _, st in rows),
                "nghttp over TLS: 50 concurrent streams on one connection, every one 200",
                r.stdout[-1500:] + r.stderr[-500:])
        r = subprocess.run([NGHTTP, "-v", "-H", ":method: HEAD", "-t", "20", f"https://127.0.0.1:{P}/n/1"],
                           capture_output=True, text=True, timeout=60)
        t.check(r.returncode == 0 and re.search(r":status: 200", r.stdout) and
                "recv DATA frame" not in r.stdout,
                "nghttp HEAD over TLS: 200 and no DATA", r.stdout[-1500:])
        body = harness.write("post.body", "x" * 70000)
        r = subprocess.run([NGHTTP, "-v", "-d", body, "-t", "20", f"https://127.0.0.1:{P}/p/1"],
                           capture_output=True, text=True, timeout=60)
        t.check(r.returncode == 0 and re.search(r":status: 200", r.stdout) and
                re.search(r"x-body-length: 70000", r.stdout, re.I) is not None,
                "nghttp POST over TLS: a 70,000-byte body reaches the backend whole", r.stdout[-2500:])
    else:
        t.skip("nghttp over TLS", "nghttp is not installed (tests/deps.sh installs nghttp2-client)")

    # ---- h2load: a bounded run -------------------------------------------------------------
    if H2LOAD:
        r = subprocess.run([H2LOAD, "-n", "2000", "-c", "4", "-m", "10", "-t", "1",
                            *[f"https://127.0.0.1:{P}/l/{i}" for i in range(20)]],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", r.stdout)
        proto = re.search(r"Application protocol: (\S+)", r.stdout)
        t.check(r.returncode == 0 and m and m.group(1) == "2000" and proto and proto.group(1) == "h2",
                "h2load over TLS (-n 2000 -c 4 -m 10): ALPN h2, all 2,000 responses 2xx", r.stdout[-1500:])
    else:
        t.skip("h2load over TLS", "h2load is not installed (tests/deps.sh installs nghttp2-client)")

    # ---- Rapid Reset over TLS ---------------------------------------------------------------
    cache.reset()
    code = rapid_reset(P, 1000)
    fetched = cache.stats().get("requests", 0)
    rc, out = curl(P, "/a/after", "--http2", "-w", "v=%{http_version}\n")
    t.check(code == 11 and fetched <= 100 and rc == 0 and "v=2" in out,
            "Rapid Reset over TLS (1,000 HEADERS+RST_STREAM): GOAWAY ENHANCE_YOUR_CALM, the backend got "
            "at most max_concurrent_streams requests, another client is served",
            (code, fetched, out[-300:]))

    after = stats()
    t.check(after["h2_connections"] - before["h2_connections"] >= 3 and after["h2c_connections"] == 0,
            "h2_connections counts the ALPN h2 connections (h2c_connections none)",
            (before["h2_connections"], after["h2_connections"], after["h2c_connections"]))
    t.check(harness.wait_until(lambda: stats()["tls_connections"] == 0, 10),
            "every TLS connection, HTTP/2 ones too, is counted out when it closes", stats()["tls_connections"])

    # ---- requests and connections by protocol ----------------------------------------------
    b = stats()
    plain = f"http://127.0.0.1:{proxy.port}"
    # HTTP/1.1: two requests on one plain connection, one on an HTTPS one, and a bad
    # request line (the proxy's own 400) on a second plain connection
    r = subprocess.run([CURL, "-sS", "-o", "/dev/null", "-o", "/dev/null", f"{plain}/b/1", f"{plain}/b/2"],
                       capture_output=True, text=True, timeout=30)
    rc, out = curl(P, "/b/3", "--http1.1")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n")
        bad = s.recv(200)
    # HTTP/2: two streams on one TLS connection, three on one h2c connection (nghttp:
    # curl 7.88 fails a second request on an h2c connection it reuses, NGINX's too)
    r2 = subprocess.run([CURL, "-sS", "-k", "--http2", "--resolve", f"localhost:{P}:127.0.0.1",
                         "-o", "/dev/null", "-o", "/dev/null",
                         f"https://localhost:{P}/b/4", f"https://localhost:{P}/b/5"],
                        capture_output=True, text=True, timeout=30)
    h2c_urls = [f"{plain}/b/6", f"{plain}/b/7", f"{plain}/b/8"] if NGHTTP else [f"{plain}/b/6"]
    r3 = subprocess.run([NGHTTP, "-n", "-t", "20", *h2c_urls] if NGHTTP else
                        [CURL, "-sS", "--http2-prior-knowledge", "-o", "/dev/null", *h2c_urls],
                        capture_output=True, text=True, timeout=30)
    a = stats()
    delta = {k: a[k] - b[k] for k in ("h1_requests", "h1_connections", "h2_streams", "h2c_streams",
                                  "h2_connections", "h2c_connections")}
    t.check(r.returncode == 0 and rc == 0 and bad.startswith(b"HTTP/1.1 400") and
            r2.returncode == 0 and r3.returncode == 0 and
            delta == {"h1_requests": 4, "h1_connections": 3, "h2_streams": 2 + len(h2c_urls),
                      "h2c_streams": len(h2c_urls), "h2_connections": 1, "h2c_connections": 1},
            "requests and connections by protocol: HTTP/1.x 4 requests (a 400 among them) on 3 "
            f"connections; HTTP/2 {2 + len(h2c_urls)} streams, {len(h2c_urls)} of them h2c, on one "
            "connection of each",
            (delta, bad[:40], r.stderr, r2.stderr, r3.stderr))
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{aport}/metrics", timeout=10).read().decode()
    page = urllib.request.urlopen(f"http://127.0.0.1:{aport}/", timeout=10).read().decode()
    t.check(f"\nringproxy_h1_requests_total {a['h1_requests']}\n" in metrics and
            f"\nringproxy_h2c_streams_total {a['h2c_streams']}\n" in metrics and
            'data-counter="h1_connections"' in page,
            "/metrics and the page carry the split (ringproxy_h1_requests_total, ..._h2c_streams_total)",
            [x for x in metrics.splitlines() if "h1_" in x or "streams" in x])

    # ---- alpn = http/1.1: never h2 ----------------------------------------------------------
    conf1 = conf.replace(f"certs = {d}/*.pem\n", f"certs = {d}/*.pem\nalpn = http/1.1\n")
    p1 = harness.Proxy(RP, conf1, tag="h2tls-h1")
    P1 = int(p1.wait_log(r"listening for HTTPS on 127\.0\.0\.1:(\d+)", 10).group(1))
    rc, out = curl(P1, "/a/4", "--http2", "-w", "v=%{http_version}\n")
    t.check(rc == 0 and out.startswith("HTTP/1.1 200") and "v=1.1" in out,
            "[tls] alpn = http/1.1: a client offering h2 and http/1.1 gets HTTP/1.1", out)
    p1.stop()
    bad = harness.write("h2tls-bad.ini", conf.replace(f"certs = {d}/*.pem\n", f"certs = {d}/*.pem\nalpn = h3, h2\n"))
    r = subprocess.run([RP, "-t", "-c", bad], capture_output=True, text=True, timeout=30)
    t.check(r.returncode == 1 and re.search(r"h2tls-bad\.ini:\d+: alpn: 'h3' is not a protocol", r.stderr),
            "-t refuses alpn naming a protocol this build does not serve, with FILE:LINE", r.stderr)

    # ---- a stop with an HTTP/2 connection open over TLS: GOAWAY, then a clean exit ----
    s = tls_sock(P, ["h2"])
    s.sendall(PREFACE + hf.SettingsFrame(0).serialize())
    s.settimeout(10)
    got = b""
    while len(got) < 9:     # our SETTINGS: the connection is h2.c's
        d = s.recv(65536)
        if not d:
            break
        got += d
    rc = proxy.stop()
    kinds = []
    buf = got
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except OSError:
        pass
    while len(buf) >= 9:
        ln = int.from_bytes(buf[:3], "big")
        kinds.append(buf[3])
        buf = buf[9 + ln:]
    s.close()
    t.check(rc == 0 and 0x7 in kinds, "a stop with an idle HTTP/2 connection open over TLS: GOAWAY to it, "
            "exit 0 (and, under ASan, nothing leaked: the session freed with the connection)", (rc, kinds))


harness.run_main(t, main)
