#!/usr/bin/env python3
"""test_switch_host.py -- the switch from NGINX to ringproxy in front of
three real Varnish 7.1 caches, NGINX set up the common way: `proxy_pass
http://thumbs;` without `proxy_set_header Host`, so NGINX sends the caches
`Host: thumbs` and Varnish (tests/e2e/varnish.vcl: Host in the hash) keeps
every object under it. The tier is filled through NGINX (clients send
`Host: img.example`); `nginx -T | ringproxy import nginx -` writes the
config; NGINX stops and ringproxy serves the same URLs. With the imported
`[proxy] backend_host = thumbs` every request is a Varnish hit and the
origin sees no fetch; with that line removed (the control, on other URLs)
every request is a miss, as before backend_host existed. Skips only where
varnishd or nginx is not installed (bash tests/deps.sh test).
usage: test_switch_host.py RINGPROXY TESTCACHE"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from varnishd import VARNISHD, Varnish  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
NGINX = shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def nginx_conf(prefix, port, ports):
    """An operator's nginx.conf: the upstream in a file it includes, no
    proxy_set_header Host."""
    servers = "".join(f"        server 127.0.0.1:{p};\n" for p in ports)
    with open(os.path.join(prefix, "thumbs-upstream.conf"), "w") as f:
        f.write(f"upstream thumbs {{\n        hash $request_uri consistent;\n{servers}        keepalive 8;\n}}\n")
    return f"""daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include thumbs-upstream.conf;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://thumbs;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


def hits(port, urls, misses=None):
    """How many of urls (GET, Host: img.example) came back 200 as a Varnish
    hit (two ids in X-Varnish); the others go to misses (URL, status, the
    backend that answered, X-Varnish) when given."""
    n = 0
    for u in urls:
        st, h, _ = H.get(port, u, headers={"Host": "img.example"})
        hit = st == 200 and len(h.get("x-varnish", "").split()) == 2
        n += hit
        if not hit and misses is not None:
            misses.append((u, st, h.get("x-ringproxy-backend"), h.get("x-varnish")))
    return n


def main():
    if not VARNISHD or not NGINX:
        t.skip("the switch from NGINX to ringproxy in front of Varnish",
               "varnishd or nginx not found (Debian packages varnish, nginx: bash tests/deps.sh test)")
        return
    origin = H.Cache(TC, "origin")
    caches = [Varnish(n, origin.port) for n in ("v1", "v2", "v3")]
    for v in caches:
        v.start()
    prefix = H.tmp_path("nginx-switch")
    os.makedirs(prefix, exist_ok=True)
    port = H.free_port()
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(nginx_conf(prefix, port, [v.port for v in caches]))
    args = [NGINX, "-p", prefix, "-e", f"{prefix}/error.log", "-c", conf]
    ng = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    H._procs.append(ng)
    def up():
        try:
            H.get(port, "/health", timeout=2)
            return True
        except OSError:
            return False
    if not H.wait_until(lambda: up() or ng.poll() is not None, 30) or ng.poll() is not None:
        raise RuntimeError("nginx did not start: " + open(f"{prefix}/error.log").read()[-2000:])

    urls = [f"/thumbs/{i}_200x200.jpg" for i in range(120)]
    control, switched = urls[:30], urls[30:]
    for u in urls:
        H.get(port, u, headers={"Host": "img.example"})
    filled = origin.stats()["requests"]
    t.check(filled == len(urls) and hits(port, urls[:10]) == 10,
            f"filled through NGINX: {filled} origin fetches for {len(urls)} URLs, then hits through NGINX")

    dump = subprocess.run(args + ["-T"], capture_output=True, text=True, timeout=60)
    imp = subprocess.run([RP, "import", "nginx", "-", "--upstream", "thumbs", "--names", "thumbs-%d"],
                         input=dump.stdout, capture_output=True, text=True, timeout=60)
    ini = imp.stdout
    t.check(imp.returncode == 0 and "\nbackend_host = thumbs\n" in ini and
            f"\nlisten = 127.0.0.1:{port}\n" in ini and "[backend thumbs-3]" in ini and
            f"; {prefix}/thumbs-upstream.conf:3: server 127.0.0.1:{caches[0].port}" in ini,
            "nginx -T | ringproxy import nginx -: the include followed, backend_host = thumbs (NGINX's "
            "$proxy_host), NGINX's listen, named thumbs-N", imp.stderr + ini)
    H.stop_pid(ng)

    # the proxy's own listeners on ports from the kernel: the only change
    ini = re.sub(r"(?m)^listen = .*$", "listen = 127.0.0.1:0", ini)
    ini = re.sub(r"(?m)^admin_listen = .*$", "admin_listen = 127.0.0.1:0", ini)
    without = H.Proxy(RP, re.sub(r"(?m)^backend_host = .*$", "", ini), tag="switch-without")
    before = origin.stats()["requests"]
    n = hits(without.port, control)
    t.check(n == 0 and origin.stats()["requests"] - before == len(control),
            f"control, the imported file without backend_host: {n} of {len(control)} requests were Varnish "
            f"hits, {origin.stats()['requests'] - before} origin fetches (the client's Host is another key)")
    without.stop()

    px = H.Proxy(RP, ini, tag="switch")
    before = origin.stats()["requests"]
    misses = []
    n = hits(px.port, switched, misses)
    # a miss here is an object not where the ring puts it: NGINX's log
    # says whether a fill went to another cache (an upstream error)
    try:
        nglog = [ln for ln in open(f"{prefix}/error.log") if "upstream" in ln][-10:]
    except OSError:
        nglog = []
    t.check(n == len(switched) and origin.stats()["requests"] == before,
            f"after the switch with the imported backend_host: {n} of {len(switched)} requests were Varnish "
            f"hits, {origin.stats()['requests'] - before} origin fetches",
            f"misses (url, status, backend, x-varnish): {misses}; NGINX's upstream lines: {nglog}")
    st, h, _ = H.get(px.port, "/thumbs/new.jpg", headers={"Host": "img.example"})
    t.check(st == 200 and h.get("x-echo-host") == "thumbs",
            "a new URL through ringproxy reaches the origin with Host: thumbs (through Varnish)",
            h.get("x-echo-host"))
    px.stop()
    for v in caches:
        v.stop()


H.run_main(t, main)
