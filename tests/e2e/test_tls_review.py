#!/usr/bin/env python3
"""test_tls_review.py -- a review of the default HTTPS settings by a tool
no one here wrote: Debian's sslscan against a [tls] listener with only
its defaults (an ECDSA and an RSA certificate, so every suite either key
allows is offered). It fails on any protocol below TLS 1.2, a suite
without forward secrecy (ECDHE/DHE, or TLS 1.3's) or without
authenticated encryption (GCM, ChaCha20-Poly1305), a weak or insecure
strength, renegotiation, compression, heartbleed, or TLS 1.2 and 1.3
missing. With testssl.sh there too, its findings of severity HIGH or
CRITICAL fail it as well (protocols, ciphers, vulnerabilities).
usage: test_tls_review.py RINGPROXY TESTCACHE"""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
SSLSCAN = shutil.which("sslscan")
TESTSSL = shutil.which("testssl") or shutil.which("testssl.sh")


def make_certs(d):
    os.makedirs(d, exist_ok=True)
    for name, newkey in (("10-ec", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]),
                         ("20-rsa", ["-newkey", "rsa:2048"])):
        k, c = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
        r = subprocess.run(["openssl", "req", "-x509", *newkey, "-nodes", "-keyout", k, "-out", c, "-days", "30",
                            "-subj", "/CN=review.test", "-addext", "subjectAltName=DNS:review.test"],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        with open(os.path.join(d, name + ".pem"), "w") as f:
            f.write(open(c).read() + open(k).read())


def main():
    if not SSLSCAN:
        t.skip("sslscan review of the default [tls]", "sslscan is not installed (tests/deps.sh test installs it)")
        return
    cache = harness.Cache(TC, "c1")
    d = harness.tmp_path("review-certs")
    make_certs(d)
    conf = harness.conf_text([cache]) + f"\n[tls]\nlisten = 127.0.0.1:0\ncerts = {d}/*.pem\n"
    proxy = harness.Proxy(RP, conf, tag="review")
    port = int(proxy.wait_log(r"listening for HTTPS on 127\.0\.0\.1:(\d+)", 10).group(1))
    r = subprocess.run([SSLSCAN, "--no-colour", "--sni-name=review.test", "--xml=-", f"127.0.0.1:{port}"],
                       capture_output=True, text=True, timeout=180)
    doc = ET.fromstring(r.stdout[r.stdout.index("<?xml"):]) if "<?xml" in r.stdout else None
    test = doc.find("ssltest") if doc is not None else None
    t.check(test is not None, "sslscan ran and wrote its XML", r.stdout[-2000:] + r.stderr[-1000:])
    if test is None:
        return
    protos = {(p.get("type"), p.get("version")): p.get("enabled") for p in test.iter("protocol")}
    old = [f"{k[0]} {k[1]}" for k, v in protos.items() if v == "1" and (k[0] == "ssl" or k[1] in ("1.0", "1.1"))]
    t.check(not old, "no protocol below TLS 1.2 (SSLv2, SSLv3, TLS 1.0, TLS 1.1 disabled)", protos)
    t.check(protos.get(("tls", "1.2")) == "1" and protos.get(("tls", "1.3")) == "1", "TLS 1.2 and TLS 1.3 enabled",
            protos)
    ciphers = [(c.get("sslversion"), c.get("cipher"), c.get("strength")) for c in test.iter("cipher")]
    weak = [c for c in ciphers
            if not (c[0] == "TLSv1.3" or (c[1].startswith(("ECDHE-", "DHE-")) and ("GCM" in c[1] or "CHACHA20" in c[1])))
            or c[2] in ("weak", "insecure", "null", "anonymous", "medium")]
    t.check(ciphers and not weak,
            f"every one of the {len(ciphers)} suites accepted has forward secrecy and authenticated encryption, "
            "none weak", "\n".join(map(str, weak or ciphers)))
    reneg = test.find("renegotiation")
    t.check(reneg is not None and reneg.get("supported") == "0", "no renegotiation",
            reneg.attrib if reneg is not None else None)
    comp = test.find("compression")
    t.check(comp is None or comp.get("supported") == "0", "no compression", comp.attrib if comp is not None else None)
    hb = [h.attrib for h in test.iter("heartbleed") if h.get("vulnerable") != "0"]
    t.check(not hb, "not vulnerable to heartbleed", hb)
    if not TESTSSL or os.environ.get("RINGPROXY_TESTSSL", "1") == "0":
        t.skip("testssl.sh: no HIGH or CRITICAL finding", "testssl.sh is not installed")
        return
    out = harness.tmp_path("testssl.json")
    r = subprocess.run([TESTSSL, "--quiet", "--warnings", "off", "--color", "0", "-p", "-s", "-U", "-E",
                        "--jsonfile", out, f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=600)
    try:
        findings = json.load(open(out))
    except (OSError, ValueError):
        findings = None
    bad = [f"{f.get('id')}: {f.get('finding')}" for f in findings or []
           if f.get("severity") in ("HIGH", "CRITICAL")]
    t.check(findings and not bad, f"testssl.sh ({len(findings or [])} findings): none HIGH or CRITICAL",
            "\n".join(bad) or r.stdout[-2000:])


harness.run_main(t, main)
