#!/usr/bin/env python3
"""test_browser_h2.py -- a real browser over HTTPS: headless Chromium
(Debian's) loads a page of 200 thumbnails through ringproxy's own TLS
listener, trusting only the test certificate's key
(--ignore-certificate-errors-spki-list, not a blanket ignore). A script
in the page writes what it saw into the DOM, read back with --dump-dom:
every image decoded (naturalWidth > 0), and the Resource Timing entries'
nextHopProtocol is h2 for every image (the default [tls] alpn, h2 first).
The backend is a small fake of the test's that serves a real 8x8 PNG for
each /thumbs/ URL and counts its fetches: each URL reached it once. Then
the same page (other URLs, so both loads are cold) through a proxy
whose [tls] alpn is http/1.1: every image arrives, over http/1.1. Both
load times are printed as TAP comments, never asserted.
usage: test_browser_h2.py RINGPROXY TESTCACHE"""

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
N = 200


def png(rgb):
    """An 8x8 PNG of one colour."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + bytes(rgb) * 8 for _ in range(8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>thumbs</title></head><body>
<pre id="result">pending</pre>
%s
<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var res = performance.getEntriesByType("resource").filter(function (e) {
    return e.name.indexOf("/thumbs/") >= 0; });
  var protos = {};
  res.forEach(function (e) { protos[e.nextHopProtocol] = (protos[e.nextHopProtocol] || 0) + 1; });
  var nav = performance.getEntriesByType("navigation")[0];
  document.getElementById("result").textContent = JSON.stringify({
    images: imgs.length, decoded: ok, entries: res.length, protos: protos,
    page: nav ? nav.nextHopProtocol : null,
    load_ms: nav ? Math.round(nav.loadEventStart - nav.startTime) : -1});
});
</script></body></html>
"""


class Backend:
    """The tier: a page and PNG thumbnails over HTTP/1.1, fetches counted
    by path."""

    def __init__(self):
        self.seen = {}
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                with outer.lock:
                    outer.seen[self.path] = outer.seen.get(self.path, 0) + 1
                m = re.fullmatch(r"/page/(\w+)\.html", self.path)
                if m:
                    imgs = "\n".join(f'<img src="/thumbs/{m.group(1)}/{i}.png" width="8" height="8">'
                                     for i in range(N))
                    body, ctype = (PAGE % imgs).encode(), "text/html; charset=utf-8"
                elif re.fullmatch(r"/thumbs/\w+/\d+\.png", self.path):
                    i = int(self.path.rsplit("/", 1)[1].split(".")[0])
                    body, ctype = png(((i * 37) % 256, (i * 91) % 256, 200)), "image/png"
                else:
                    body, ctype = b"not here\n", "text/plain"
                    self.send_response(404)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Cache-Control", "max-age=300")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        # the proxy opens up to max_concurrent_streams connections at
        # once for a page's burst: a backlog of 5 (socketserver's) would
        # drop SYNs, and the fetches would wait out connect_timeout
        ThreadingHTTPServer.request_queue_size = 512
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def cert(d):
    """An ECDSA P-256 certificate for 127.0.0.1 in d/10-local.pem; the
    base64 SHA-256 of its SubjectPublicKeyInfo (what Chromium's
    --ignore-certificate-errors-spki-list takes)."""
    os.makedirs(d, exist_ok=True)
    k, c = os.path.join(d, "local.key"), os.path.join(d, "local.crt")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", k, "-out", c, "-days", "30", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(d, "10-local.pem"), "w") as f:
        f.write(open(c).read() + open(k).read())
    pub = subprocess.run(["openssl", "x509", "-in", c, "-noout", "-pubkey"], capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub, capture_output=True,
                         check=True).stdout
    import hashlib
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def chromium(url, spki):
    with tempfile.TemporaryDirectory(prefix="rp-chromium-") as ud:
        p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                            "--no-first-run", "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", f"--user-data-dir={ud}", f"--ignore-certificate-errors-spki-list={spki}",
                            "--dump-dom", url],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    m = re.search(r'<pre id="result">([^<]*)</pre>', p.stdout)
    try:
        return json.loads(m.group(1).replace("&quot;", '"')) if m else None, p.stderr[-1500:]
    except ValueError:
        return None, m.group(1)


def load(backend, run, alpn, spki, d):
    conf = harness.conf_text([("tier", backend.port)], proxy={"admin_listen": "127.0.0.1:0"},
                             cache={"size": "16m"})
    conf += f"\n[tls]\nlisten = 127.0.0.1:0\ncerts = {d}/*.pem\n" + (f"alpn = {alpn}\n" if alpn else "")
    proxy = harness.Proxy(RP, conf, tag=f"browser-{run}")
    port = int(proxy.wait_log(r"listening for HTTPS on 127\.0\.0\.1:(\d+)", 10).group(1))
    res, err = chromium(f"https://127.0.0.1:{port}/page/{run}.html", spki)
    proxy.stop()
    return res, err


def main():
    if not CHROMIUM:
        t.skip("a browser over HTTPS", "no chromium (bash tests/deps.sh test installs it)")
        return
    backend = Backend()
    spki = cert(harness.tmp_path("browser-certs"))
    d = harness.tmp_path("browser-certs")

    res, err = load(backend, "h2", None, spki, d)
    t.check(res and res["images"] == N and res["decoded"] == N,
            f"Chromium over HTTPS (default alpn h2, http/1.1): all {N} thumbnails arrive and decode", (res, err))
    t.check(res and res["entries"] == N and res["protos"] == {"h2": N} and res["page"] == "h2",
            "every image's (and the page's) nextHopProtocol is h2", res)
    thumbs = {p: n for p, n in backend.seen.items() if p.startswith("/thumbs/h2/")}
    t.check(len(thumbs) == N and set(thumbs.values()) == {1},
            f"the tier saw each of the {N} URLs once", sorted(set(thumbs.values())))
    if res:
        t.note(f"page of {N} thumbnails over HTTP/2: load {res['load_ms']} ms (Resource Timing, not asserted)")

    res1, err = load(backend, "h1", "http/1.1", spki, d)
    t.check(res1 and res1["decoded"] == N and res1["protos"] == {"http/1.1": N} and res1["page"] == "http/1.1",
            f"the same page with [tls] alpn = http/1.1: all {N} arrive, over http/1.1", (res1, err))
    thumbs = {p: n for p, n in backend.seen.items() if p.startswith("/thumbs/h1/")}
    t.check(len(thumbs) == N and set(thumbs.values()) == {1}, f"the tier saw each of the {N} URLs once",
            sorted(set(thumbs.values())))
    if res1:
        t.note(f"page of {N} thumbnails over HTTP/1.1: load {res1['load_ms']} ms (Resource Timing, not asserted)")
    backend.stop()


harness.run_main(t, main)
