#!/usr/bin/env python3
"""test_tls.py -- HTTPS on the client side ([tls]), with real clients:
curl picks a certificate by SNI (--resolve, two names, a wildcard, an
unknown name getting the first file's), speaks TLS 1.2 and TLS 1.3 and
is refused TLS 1.1; openssl s_client resumes a session (-sess_out,
-sess_in); requests over TLS forward X-Forwarded-Proto: https. A reload
that replaces a certificate under a keep-alive client drops nothing
(the open connection keeps its certificate, a new one gets the new); a
broken certificate or a key that does not match fails the reload and the
old set serves; strict_sni refuses an unknown name; a stalled handshake
is cut at handshake_timeout; -t refuses an expired certificate, TLS 1.1
and a cipher without forward secrecy, each with FILE:LINE or FILE. The
counters: full and resumed handshakes, failures by reason, connections.
Then several listen addresses, each with its own proxy_protocol, a PROXY
header before a TLS handshake ([tls] proxy_protocol), and Debian's hitch
in front with PROXY v2: its SSL TLV gives X-Forwarded-Proto: https, and
a client that negotiated h2 with hitch is served HTTP/2 and counted.
curl speaks HTTP/1.1 here (--http1.1) unless a check asks for h2:
HTTP/2 over TLS is test_h2tls.py's.
usage: test_tls.py RINGPROXY TESTCACHE"""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
HITCH = shutil.which("hitch", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
CURL = shutil.which("curl")


def openssl(*args, stdin=None, timeout=20):
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, timeout=timeout)


def make_cert(name, sans, key="ec", days=30):
    """A self-signed certificate with its key in DIR/name.pem (and the
    certificate alone in name.crt, for a client's CA file)."""
    d = harness.tmp_path("certs")
    os.makedirs(d, exist_ok=True)
    k, c = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if key == "ec" else ["-newkey", "rsa:2048"]
    san = ",".join("DNS:" + s for s in sans)
    if days > 0:
        r = openssl("req", "-x509", *newkey, "-nodes", "-keyout", k, "-out", c, "-days", str(days),
                    "-subj", "/CN=" + sans[0], "-addext", "subjectAltName=" + san)
    else:
        csr = os.path.join(d, name + ".csr")
        r = openssl("req", "-new", *newkey, "-nodes", "-keyout", k, "-out", csr, "-subj", "/CN=" + sans[0])
        r = openssl("x509", "-req", "-in", csr, "-signkey", k, "-days", str(days), "-out", c)
    assert r.returncode == 0, r.stderr
    return k, c


def pem(path, crt, key):
    with open(path + ".tmp", "w") as f:
        f.write(open(crt).read() + open(key).read())
    os.rename(path + ".tmp", path)


def der_of(crt):
    return ssl.PEM_cert_to_DER_cert(open(crt).read())


def curl(port, name, path, *extra, ca=None):
    """curl https://NAME:PORT/path resolved to 127.0.0.1: (exit code,
    status, headers text)."""
    args = [CURL, "-sS", "--max-time", "20", "--resolve", f"{name}:{port}:127.0.0.1", "-D", "-", "-o",
            "/dev/null", *([] if "--http2" in extra else ["--http1.1"]), *extra]
    args += ["--cacert", ca] if ca else ["-k"]
    r = subprocess.run(args + [f"https://{name}:{port}{path}"], capture_output=True, text=True, timeout=30)
    status = r.stdout.split(" ", 2)[1] if r.stdout.startswith("HTTP/") else None
    return r.returncode, status, r.stdout + r.stderr


def tls_conn(port, name, ca=None, host="127.0.0.1", pre=b""):
    """A TLS connection (Python's ssl) to port with SNI name (None: no
    SNI); pre: bytes sent before the handshake (a PROXY header)."""
    ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    if not ca:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    s = socket.create_connection((host, port), timeout=10)
    if pre:
        s.sendall(pre)
    return ctx.wrap_socket(s, server_hostname=name)


def can_connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def get_on(s, path, host="img.test"):
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return harness.Reader(s).response()


def together(port, reqs, tls12=False):
    """The client's last handshake flight (TLS 1.3: its Finished) and the
    records of reqs, one each, sent in one write: the proxy reads them in
    one go and must serve all without a socket event for what it holds
    (TLS 1.2: the client cannot speak first, so only the requests go
    together). How many 200 responses came before the close."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="a.test")
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if out.pending:
                sock.sendall(out.read())
            got = sock.recv(65536)
            if not got:
                return 0
            inc.write(got)
    if tls12 and out.pending:
        sock.sendall(out.read())
    for r in reqs:
        obj.write(r)
    sock.sendall(out.read())
    got = b""
    end = time.monotonic() + 10
    try:
        while time.monotonic() < end:
            try:
                chunk = obj.read(65536)
                if not chunk:
                    break
                got += chunk
            except ssl.SSLWantReadError:
                data = sock.recv(65536)
                if not data:
                    break
                inc.write(data)
    except (ssl.SSLZeroReturnError, ssl.SSLEOFError, OSError):
        pass
    sock.close()
    return got.count(b"HTTP/1.1 200 ")


def main():
    cache = harness.Cache(TC, "c1")
    d = harness.tmp_path("certs")
    ka, ca_a = make_cert("a", ["a.test", "*.a.test"])
    kb, ca_b = make_cert("b", ["b.test"], key="rsa")
    pem(os.path.join(d, "10-a.pem"), ca_a, ka)
    pem(os.path.join(d, "20-b.pem"), ca_b, kb)
    kbe, ca_be = make_cert("b-ec", ["b.test"])
    pem(os.path.join(d, "30-b-ec.pem"), ca_be, kbe)
    b_both = harness.write("b-both.crt", open(ca_b).read() + open(ca_be).read())
    conf = harness.conf_text([cache], proxy={"admin_listen": "127.0.0.1:0"}, cache={"size": "16m"})
    alog = harness.tmp_path("tls-access.log")
    conf += f"\n[tls]\nlisten = 127.0.0.1:0\ncerts = {d}/*.pem\nhandshake_timeout = 1s\n\n[log]\naccess = {alog}\n"
    path = harness.write("tls.ini", conf)
    proxy = harness.Proxy(RP, path=path)
    P = int(proxy.wait_log(r"listening for HTTPS on 127\.0\.0\.1:(\d+)", 10).group(1))
    aport = proxy.admin_port()

    def stats():
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{aport}/stats", timeout=10).read())

    # ---- SNI, versions, X-Forwarded-Proto ----------------------------------------
    rc, st, out = curl(P, "a.test", "/img/1", ca=ca_a)
    t.check(rc == 0 and st == "200" and "X-Echo-X-Forwarded-Proto: https" in out,
            "curl https://a.test (SNI a.test): a.test's certificate verifies, 200, X-Forwarded-Proto: https", out)
    rc, st, out = curl(P, "b.test", "/img/2", ca=b_both)
    t.check(rc == 0 and st == "200", "curl https://b.test: b.test's own certificate verifies", out)
    for sigalg, want in (("RSA-PSS+SHA256", "2048 bit"), ("ECDSA+SHA256", "256 bit")):
        r = openssl("s_client", "-connect", f"127.0.0.1:{P}", "-servername", "b.test", "-sigalgs", sigalg,
                    stdin=b"")
        o = r.stdout.decode(errors="replace")
        t.check(f"Server public key is {want}" in o,
                f"b.test has an RSA and an ECDSA certificate: a client signing with {sigalg} gets the {want} one",
                o[-800:])
    rc, _, out = curl(P, "b.test", "/img/2", ca=ca_a)
    t.check(rc != 0, "b.test with only a.test's certificate trusted: not verified (it is b's)", out)
    rc, st, out = curl(P, "x.a.test", "/img/3", ca=ca_a)
    t.check(rc == 0 and st == "200", "x.a.test: the wildcard *.a.test serves it", out)
    s = tls_conn(P, "c.test")
    t.check(s.getpeercert(binary_form=True) == der_of(ca_a),
            "an unknown name (c.test) gets the first file's certificate (10-a.pem)")
    s.close()
    s = tls_conn(P, None)
    t.check(s.getpeercert(binary_form=True) == der_of(ca_a), "no SNI: the first file's certificate")
    s.close()
    rc, st, out = curl(P, "a.test", "/img/4", "--tlsv1.2", "--tls-max", "1.2", "-w", "%{ssl_verify_result}", ca=ca_a)
    t.check(rc == 0 and st == "200", "TLS 1.2 (curl --tls-max 1.2): 200", out)
    rc, st, out = curl(P, "a.test", "/img/5", "--tlsv1.3", ca=ca_a)
    t.check(rc == 0 and st == "200", "TLS 1.3 (curl --tlsv1.3): 200", out)
    s = tls_conn(P, "a.test")
    t.check(s.version() == "TLSv1.3" and s.selected_alpn_protocol() is None,
            "a default client negotiates TLS 1.3", s.version())
    s.close()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1", "h2"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", P), timeout=10), server_hostname="a.test")
    t.check(s.selected_alpn_protocol() == "h2", "ALPN http/1.1, h2 offered: h2 chosen (the server's order, "
            "[tls] alpn = h2, http/1.1 by default)", s.selected_alpn_protocol())
    s.close()
    ctx.set_alpn_protocols(["http/1.1"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", P), timeout=10), server_hostname="a.test")
    t.check(s.selected_alpn_protocol() == "http/1.1", "ALPN http/1.1 offered alone: http/1.1",
            s.selected_alpn_protocol())
    r = get_on(s, "/img/alpn")
    t.check(r.status == 200, "a request on it: 200")
    s.close()
    two = [b"GET /img/t1 HTTP/1.1\r\nHost: a.test\r\n\r\n",
           b"GET /img/t2 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"]
    n = together(P, two)
    t.check(n == 2, "TLS 1.3: the client's Finished and two requests' records in one write: both answered "
            "(what the proxy read ahead is served without waiting for a socket event)", n)
    n = together(P, two, tls12=True)
    t.check(n == 2, "TLS 1.2: two requests' records in one write after the handshake: both answered", n)
    before = stats()
    rc, _, out = curl(P, "a.test", "/img/6", "--tlsv1.1", "--tls-max", "1.1", "--ciphers", "DEFAULT@SECLEVEL=0")
    t.check(rc != 0, "TLS 1.1 is refused", out)
    after = harness.wait_until(lambda: stats()["tls_failed_cipher"] + stats()["tls_failed_protocol"] >
                               before["tls_failed_cipher"] + before["tls_failed_protocol"], 5)
    t.check(after, "and counted as a failed handshake (tls_failed_cipher or tls_failed_protocol)")

    lines = harness.lines_until(alog, lambda got: any("/img/5 " in x for x in got) and
                                any("/img/4 " in x for x in got), 5)
    l13 = [x for x in lines if "/img/5 " in x]
    l12 = [x for x in lines if "/img/4 " in x]
    t.check(l13 and l13[0].rstrip().endswith(" tls=TLSv1.3 cipher=TLS_AES_256_GCM_SHA384 sni=a.test") and
            l12 and " tls=TLSv1.2 cipher=ECDHE-ECDSA-" in l12[0] and l12[0].rstrip().endswith(" sni=a.test"),
            "the access log names an HTTPS request's TLS version, cipher and SNI", "\n".join(lines[-6:]))

    # ---- [cache] key_scheme ---------------------------------------------------------
    def cache_status(https, path):
        if https:
            return curl(P, "b.test", path, "-H", "Host: img.test")[2]
        return "\n".join(f"{k}: {v}" for k, v in harness.get(proxy.port, path, headers={"Host": "img.test"})[1].items())

    for _ in range(3):
        out = cache_status(False, "/ks/1")
    t.check("hit" in out, "an object stored from http requests: an http hit", out)
    out = cache_status(True, "/ks/1")
    t.check("fwd=miss" in out, "key_scheme on (the default): the same URL over https is a miss of its own", out)

    # ---- the certificates in /stats and /metrics ----------------------------------
    certs = {c["file"]: c for c in stats()["tls_certificates"]}
    a_ent = certs.get(os.path.join(d, "10-a.pem"), {})
    t.check(a_ent.get("names") == ["a.test", "*.a.test"] and 29 * 86400 < a_ent.get("expiry_seconds", 0) <= 30 * 86400,
            "/stats tls_certificates: each file with its names and about 30 days to expiry", certs)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{aport}/metrics", timeout=10).read().decode()
    line = f'ringproxy_tls_certificate_expiry_seconds{{file="{d}/20-b.pem",name="b.test"}} '
    t.check(line in metrics and "ringproxy_tls_handshakes_total" in metrics and "30-b-ec.pem" in metrics,
            "/metrics: ringproxy_tls_certificate_expiry_seconds{file,name}, and the handshake counters",
            "\n".join(x for x in metrics.splitlines() if "tls" in x))

    page = urllib.request.urlopen(f"http://127.0.0.1:{aport}/", timeout=10).read().decode()
    t.check("<h2>Certificates</h2>" in page and "20-b.pem" in page and "a.test,*.a.test" in page and
            ("29 days" in page or "30 days" in page),
            "the page lists each certificate with its names and days to expiry", page[page.find("Certificates"):][:600])

    # ---- resumption ----------------------------------------------------------------
    sess = harness.tmp_path("sess.pem")
    req = b"GET /img/r HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"
    for ver in ("-tls1_2", "-tls1_3"):
        r1 = openssl("s_client", "-connect", f"127.0.0.1:{P}", "-servername", "a.test", ver, "-sess_out", sess,
                     "-ign_eof", stdin=req)
        r2 = openssl("s_client", "-connect", f"127.0.0.1:{P}", "-servername", "a.test", ver, "-sess_in", sess,
                     "-ign_eof", stdin=req)
        o2 = r2.stdout.decode(errors="replace")
        t.check(b"HTTP/1.1 200" in r1.stdout and "Reused," in o2 and "HTTP/1.1 200" in o2,
                f"openssl s_client {ver} -sess_out then -sess_in: the session is resumed, 200",
                o2[-1500:] + r2.stderr.decode(errors="replace")[-500:])
    st = stats()
    t.check(st["tls_resumed"] >= 2 and st["tls_handshakes"] >= 8,
            f"counted: {st['tls_handshakes']} full and {st['tls_resumed']} resumed handshakes")

    sess_keep = harness.tmp_path("keep.sess")
    s_client(P, sess_keep, True)

    # ---- a stalled handshake -----------------------------------------------------
    before = stats()["tls_failed_timeout"]
    raw = socket.create_connection(("127.0.0.1", P), timeout=10)
    raw.sendall(b"\x16\x03\x01\x00\x80\x01")      # a ClientHello's first bytes, no more
    t0 = time.monotonic()
    try:
        closed = raw.recv(100) == b""
    except (ConnectionResetError, socket.timeout):
        closed = False
    took = time.monotonic() - t0
    t.check(closed and took < 8, f"a handshake stalled mid-ClientHello is cut at handshake_timeout 1s ({took:.1f}s)")
    raw.close()
    t.check(harness.wait_until(lambda: stats()["tls_failed_timeout"] == before + 1, 5),
            "and counted in tls_failed_timeout")
    t.check(harness.wait_until(lambda: stats()["tls_connections"] == 0, 5),
            "tls_connections comes back to 0", stats()["tls_connections"])

    # ---- a reload replaces a certificate under a keep-alive client -------------------
    ka2, ca_a2 = make_cert("a2", ["a.test", "*.a.test"])
    keep = tls_conn(P, "a.test")
    old_der = keep.getpeercert(binary_form=True)
    results = {"ok": 0, "failed": 0}
    stop = threading.Event()

    def client():
        n = 0
        while not stop.is_set() and n < 20000:
            try:
                r = get_on(keep, f"/ka/{n % 50}", host="a.test")
                results["ok" if r.status == 200 else "failed"] += 1
            except Exception:   # noqa: BLE001
                results["failed"] += 1
                return
            n += 1

    th = threading.Thread(target=client)
    th.start()
    harness.wait_until(lambda: results["ok"] > 20, 10)
    since = proxy.log_size()
    pem(os.path.join(d, "10-a.pem"), ca_a2, ka2)
    out = proxy.reload()
    reloaded = out and not out.startswith("reload failed")
    harness.wait_until(lambda: results["ok"] > 40, 10)
    new = tls_conn(P, "a.test", ca=ca_a2)
    new_der = new.getpeercert(binary_form=True)
    r = get_on(new, "/img/new", host="a.test")
    new.close()
    stop.set()
    th.join(30)
    t.check(reloaded and results["failed"] == 0 and results["ok"] > 40,
            f"a reload that replaces a.test's certificate under a keep-alive client: {results['ok']} requests, "
            f"{results['failed']} failed", proxy.log()[since:])
    t.check(keep.getpeercert(binary_form=True) == old_der and new_der == der_of(ca_a2) and r.status == 200,
            "the open connection keeps the old certificate; a new one gets (and verifies) the new")
    keep.close()

    # ---- reloads refused: a broken file, a key that does not match ------------------
    open(os.path.join(d, "20-b.pem"), "w").write("-----BEGIN CERTIFICATE-----\nbroken\n")
    since = proxy.log_size()
    m = proxy.reload()
    t.check(m and m.startswith("reload failed") and "20-b.pem" in proxy.log()[since:], "a broken certificate file fails the reload, naming the file",
            proxy.log()[since:])
    rc, st, out = curl(P, "b.test", "/img/7", ca=b_both)
    t.check(rc == 0 and st == "200", "and the old set serves on: b.test's certificate still verifies", out)
    pem(os.path.join(d, "20-b.pem"), ca_b, ka)
    since = proxy.log_size()
    m = proxy.reload()
    t.check(m and m.startswith("reload failed") and "the private key does not match the certificate" in proxy.log()[since:],
            "b's certificate with a's key fails the reload: the key does not match", proxy.log()[since:])
    pem(os.path.join(d, "20-b.pem"), ca_b, kb)

    # ---- strict_sni, by a reload ---------------------------------------------------
    conf2 = conf.replace("handshake_timeout = 1s\n", "handshake_timeout = 1s\nstrict_sni = on\n")
    conf2 = conf2.replace("size = 16m\n", "size = 16m\nkey_scheme = off\n")
    harness.write("tls.ini", conf2)
    since = proxy.log_size()
    m = proxy.reload()
    t.check(m and not m.startswith("reload failed"), "a reload with strict_sni = on", proxy.log()[since:])
    t.check(s_client(P, sess_keep, False),
            "without ticket_keys, a session from before three reloads still resumes (keys from the process's secret)")
    before = stats()["tls_failed_sni"]
    rc, _, out = curl(P, "c.test", "/img/8")
    t.check(rc != 0, "strict_sni: an unknown name (c.test) fails its handshake", out)
    rc, st, out = curl(P, "b.test", "/img/9", ca=b_both)
    t.check(rc == 0 and st == "200", "strict_sni: a known name is served", out)
    t.check(harness.wait_until(lambda: stats()["tls_failed_sni"] == before + 1, 5), "counted in tls_failed_sni")
    for _ in range(3):
        out = cache_status(False, "/ks/2")
    out = cache_status(True, "/ks/2")
    t.check("hit" in out, "key_scheme = off: an object stored from http requests is an https hit too", out)

    # ---- -t -------------------------------------------------------------------------
    ke, ce = make_cert("e", ["e.test"], days=-1)
    ed = harness.tmp_path("expired")
    os.makedirs(ed, exist_ok=True)
    pem(os.path.join(ed, "e.pem"), ce, ke)

    def check_t(extra, certs=d):
        text = harness.conf_text([cache]) + f"\n[tls]\nlisten = 127.0.0.1:0\ncerts = {certs}/*.pem\n" + extra
        p = harness.write("t.ini", text)
        r = subprocess.run([RP, "-t", "-c", p], capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout + r.stderr

    rc, out = check_t("", certs=ed)
    t.check(rc == 1 and "e.pem: the certificate has expired" in out, "-t refuses an expired certificate, naming the file",
            out)
    rc, out = check_t("protocols = TLSv1.1 TLSv1.2\n")
    t.check(rc == 1 and "t.ini:" in out and "TLSv1.1 is refused" in out, "-t refuses TLSv1.1 with FILE:LINE", out)
    rc, out = check_t("ciphers = AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256\n")
    t.check(rc == 1 and "t.ini:" in out and "AES128-SHA is refused" in out,
            "-t refuses a cipher without forward secrecy with FILE:LINE", out)
    rc, out = check_t("alpn = h3, http/1.1\n")
    t.check(rc == 1 and "not a protocol this build serves" in out, "-t refuses alpn h3 (not served by this build)",
            out)
    ks, cs = make_cert("soon", ["soon.test"], days=3)
    sd = harness.tmp_path("soon")
    os.makedirs(sd, exist_ok=True)
    pem(os.path.join(sd, "s.pem"), cs, ks)
    rc, out = check_t("", certs=sd)
    t.check(rc == 0 and "warning:" in out and "s.pem: the certificate expires in" in out,
            "-t warns of a certificate that expires within 14 days", out)

    fleet_tickets(cache, d)
    listen_and_hitch(cache, d, ca_a, ka)


def s_client(port, sess, out):
    """One request by openssl s_client (TLS 1.3), saving its session to sess
    (out) or resuming it (not out): whether it was resumed."""
    req = b"GET /t HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"
    r = openssl("s_client", "-connect", f"127.0.0.1:{port}", "-servername", "a.test", "-tls1_3",
                "-sess_out" if out else "-sess_in", sess, "-ign_eof", stdin=req)
    return "Reused," in r.stdout.decode(errors="replace")


def fleet_tickets(cache, d):
    """[tls] ticket_keys: two proxies with the same file resume each other's
    sessions; a file that is not keys fails -t with FILE:LINE."""
    keys = harness.write("tickets.keys", "# the fleet's keys, newest first\n" + "\n".join(
        subprocess.run(["sh", "-c", "openssl rand 80 | base64 -w0"], capture_output=True, text=True).stdout
        for _ in range(2)) + "\n")
    conf = harness.conf_text([cache]) + f"\n[tls]\nlisten = 127.0.0.1:0\ncerts = {d}/*.pem\nticket_keys = {keys}\n"
    ports = []
    for tag in ("fleet1", "fleet2"):
        p = harness.Proxy(RP, conf, tag=tag)
        ports.append(int(p.wait_log(r"listening for HTTPS on 127\.0\.0\.1:(\d+)", 10).group(1)))
    sess = harness.tmp_path("fleet.sess")
    s_client(ports[0], sess, True)
    t.check(s_client(ports[1], sess, False),
            "ticket_keys: a session from one proxy resumes on another with the same file (a fleet)")
    bad = harness.write("bad.keys", "# keys\nnot-a-key\n")
    p = harness.write("tk.ini", conf.replace(keys, bad))
    r = subprocess.run([RP, "-t", "-c", p], capture_output=True, text=True, timeout=30)
    t.check(r.returncode == 1 and "bad.keys:2: a key is 80 bytes in base64" in r.stderr,
            "-t refuses a ticket_keys file that holds no key, with FILE:LINE", r.stderr)


def listen_and_hitch(cache, d, ca_a, ka):
    """Several listen addresses with their own proxy_protocol; a PROXY
    header before a TLS handshake; hitch in front."""
    conf = harness.conf_text([cache], proxy={
        "listen": "127.0.0.1:0 proxy_protocol=off, 127.0.0.2:0 proxy_protocol=on",
        "proxy_protocol_from": "127.0.0.1", "admin_listen": "127.0.0.1:0"})
    conf += f"\n[tls]\nlisten = 127.0.0.3:0\nproxy_protocol = on\ncerts = {d}/*.pem\n"
    proxy = harness.Proxy(RP, conf, tag="multi")
    p1 = proxy.port
    p2 = int(proxy.wait_log(r"listening on 127\.0\.0\.2:(\d+) too", 10).group(1))
    p3 = int(proxy.wait_log(r"listening for HTTPS on 127\.0\.0\.3:(\d+) too", 10).group(1))
    aport = proxy.admin_port()
    st = harness.get(p1, "/m/1")[0]
    t.check(st == 200, "listen 127.0.0.1 proxy_protocol=off: a local client without a header is served")
    s = socket.create_connection(("127.0.0.2", p2), timeout=10)
    s.sendall(b"PROXY TCP4 192.0.2.5 127.0.0.2 1000 80\r\nGET /m/2 HTTP/1.1\r\nHost: x\r\n\r\n")
    r = harness.Reader(s).response()
    s.close()
    t.check(r.status == 200 and r.h("X-Echo-X-Forwarded-For") == "192.0.2.5",
            "listen 127.0.0.2 proxy_protocol=on: its PROXY header names the client", r.headers)
    s = tls_conn(p3, "a.test", host="127.0.0.3",
                 pre=b"PROXY TCP4 198.51.100.7 127.0.0.3 1000 443\r\n")
    r = get_on(s, "/m/3")
    s.close()
    t.check(r.status == 200 and r.h("X-Echo-X-Forwarded-For") == "198.51.100.7" and
            r.h("X-Echo-X-Forwarded-Proto") == "https",
            "[tls] proxy_protocol: a PROXY header, then the handshake: served as 198.51.100.7 over https", r.headers)

    if not HITCH:
        t.skip("hitch in front with PROXY v2", "hitch is not installed (tests/deps.sh installs it)")
        return
    for alpn, want in (("http/1.1", "https"), ("h2,http/1.1", None)):
        hport = harness.free_port()
        hconf = harness.write(f"hitch.{hport}.conf",
                              f'frontend = "[127.0.0.1]:{hport}"\nbackend = "[127.0.0.2]:{p2}"\n'
                              f'pem-file = "{d}/10-a.pem"\nwrite-proxy-v2 = on\nworkers = 1\n'
                              f'alpn-protos = "{alpn}"\ntls-protos = TLSv1.2 TLSv1.3\n' +
                              # hitch refuses to run its workers as root
                              ('user = "nobody"\ngroup = "nogroup"\n' if os.geteuid() == 0 else ""))
        h = subprocess.Popen([HITCH, "--config", hconf, "--daemon=off"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        harness._procs.append(h)
        up = harness.wait_until(lambda: can_connect(hport), 10)
        before = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{aport}/stats", timeout=10).read())
        if want:
            rc, st, out = curl(hport, "a.test", "/h/1")
            t.check(up and rc == 0 and st == "200" and "X-Echo-X-Forwarded-Proto: https" in out,
                    "hitch (write-proxy-v2) in front: its SSL TLV gives X-Forwarded-Proto: https", out)
        else:
            rc, st, out = curl(hport, "a.test", "/h/2", "--http2", "-w", "v=%{http_version}")
            after = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{aport}/stats", timeout=10).read())
            t.check(up and rc == 0 and st == "200" and "v=2" in out and
                    "x-echo-x-forwarded-proto: https" in out.lower() and
                    after["h2_connections"] == before["h2_connections"] + 1,
                    "hitch offering h2, http/1.1: a client that negotiated h2 is served HTTP/2 (its ALPN "
                    "TLV), https, counted in h2_connections", out)
        harness.stop_pid(h)


harness.run_main(t, main)
