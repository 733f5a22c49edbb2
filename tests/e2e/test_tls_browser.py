#!/usr/bin/env python3
"""test_tls_browser.py -- a real browser over HTTPS: headless Chromium
loads a page of 100 thumbnails from ringproxy's [tls] listener, trusting
the test certificate by its SPKI hash (--ignore-certificate-errors-spki-list,
not a blanket ignore). Every image arrives (each /thumbs/ URL is in the
access log with 200 over TLS 1.3, SNI localhost), each is fetched once from
the backend (the cache answers a second look), and no handshake failed.
usage: test_tls_browser.py RINGPROXY TESTCACHE"""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
N = 100


def spki_hash(crt):
    """base64 SHA-256 of the certificate's SubjectPublicKeyInfo (DER), as
    --ignore-certificate-errors-spki-list takes it."""
    pub = subprocess.run(["openssl", "x509", "-in", crt, "-pubkey", "-noout"], capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub, capture_output=True,
                         check=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def main():
    if not CHROMIUM:
        t.skip("100 thumbnails in headless Chromium over HTTPS", "no chromium (bash tests/deps.sh test installs it)")
        return
    cache = harness.Cache(TC, "c1")
    d = harness.tmp_path("browser-certs")
    os.makedirs(d, exist_ok=True)
    k, c = os.path.join(d, "localhost.key"), os.path.join(d, "localhost.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", k, "-out", c, "-days", "30", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], capture_output=True, check=True)
    with open(os.path.join(d, "localhost.pem"), "w") as f:
        f.write(open(c).read() + open(k).read())
    alog = harness.tmp_path("browser-access.log")
    conf = harness.conf_text([cache], proxy={"admin_listen": "127.0.0.1:0"}, cache={"size": "16m", "min_uses": 1})
    conf += f"\n[tls]\nlisten = 127.0.0.1:0\ncerts = {d}/localhost.pem\n\n[log]\naccess = {alog}\n"
    proxy = harness.Proxy(RP, conf, tag="browser")
    port = int(proxy.wait_log(r"listening for HTTPS on 127\.0\.0\.1:(\d+)", 10).group(1))
    aport = proxy.admin_port()
    page = harness.write("thumbs.html", "<!doctype html><title>thumbs</title>\n" + "".join(
        f'<img src="https://localhost:{port}/thumbs/{i}_200x200.jpg" width=20 height=20>\n' for i in range(N)) +
        # the same images again: the browser's own cache or ringproxy's answers them
        "".join(f'<img src="https://localhost:{port}/thumbs/{i}_200x200.jpg?again">\n' for i in range(0, N, 10)))
    with tempfile.TemporaryDirectory(prefix="rp-chromium-") as ud:
        p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            f"--user-data-dir={ud}", f"--ignore-certificate-errors-spki-list={spki_hash(c)}",
                            "--virtual-time-budget=10000", "--dump-dom", "file://" + page],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    t.check(p.returncode == 0 and "thumbs" in p.stdout, "headless Chromium loaded the page", p.stderr[-1500:])
    want = [f"/thumbs/{i}_200x200.jpg " for i in range(N)]
    lines = harness.lines_until(alog, lambda got: all(any(w in x for x in got) for w in want), 15)
    got = [w for w in want if any(w in x and '" 200 ' in x and " tls=TLSv1.3 " in x and x.rstrip().endswith("sni=localhost")
                                  for x in lines)]
    t.check(len(got) == N, f"every one of the {N} thumbnails came over TLS 1.3 with SNI localhost, 200 ({len(got)})",
            "\n".join(lines[:5]))
    stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{aport}/stats", timeout=10).read())
    backend = cache.stats()["requests"]
    t.check(backend == N + N // 10,
            f"each image fetched once from the backend ({backend} requests for {N} + {N // 10} URLs)")
    failed = sum(stats[k] for k in ("tls_failed_sni", "tls_failed_cipher", "tls_failed_protocol", "tls_failed_timeout"))
    t.check(stats["tls_handshakes"] >= 1 and failed == 0,
            f"Chromium's handshakes: {stats['tls_handshakes']} full, {stats['tls_resumed']} resumed, {failed} failed",
            stats)


harness.run_main(t, main)
