"""benchproc.py -- processes for the Python bench drivers (ramp.py,
varnish-spill.py, migrate.py, replicas.py): start, stop by PID (varnishd and NGINX by
their process group), free loopback ports, plain GETs, waiting for a
condition or a log line, the origin and its per-second counts, one
varnishd, a pass over every Zipf key, and wrk with zipf.lua. Every
process started here is in PROCS until stopped."""

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

PROCS = []      # (Popen, whole process group?)


def stop(p, group=False):
    """SIGTERM to p (its group for varnishd), SIGKILL after 10 s."""
    if p.poll() is not None:
        return
    kill = (lambda s: os.killpg(p.pid, s)) if group else p.send_signal
    try:
        kill(signal.SIGTERM)
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        kill(signal.SIGKILL)
        p.wait(timeout=10)
    except ProcessLookupError:
        pass


def stop_from(n=0):
    """Stop the processes started after the first n, newest first."""
    for p, group in reversed(PROCS[n:]):
        stop(p, group)
    del PROCS[n:]


def stop_all_but(keep):
    """Stop the processes of PROCS but the Popens in keep (the origin,
    which a driver's runs share), newest first."""
    for p, group in reversed([x for x in PROCS if x[0] not in keep]):
        stop(p, group)
    PROCS[:] = [x for x in PROCS if x[0] in keep]


def driver_args(*names):
    """A driver's start: its script stops it with SIGTERM, which then
    exits as an error does (so that its finally stops what it started);
    the --NAME arguments of names, each required."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    for a in names:
        ap.add_argument("--" + a, required=True)
    return ap.parse_args()


def start(argv, log, group=False):
    with open(log, "ab") as f:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=group)
    PROCS.append((p, group))
    return p


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(port, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def warm(port, keys, host=None):
    """GET every Zipf key once through the proxy (4 keep-alive clients),
    with the Host header host (None: 127.0.0.1:port)."""
    headers = {"Host": host} if host else {}

    def client(part):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for k in part:
            c.request("GET", f"/z/{k}.jpg", headers=headers)
            c.getresponse().read()
        c.close()
    threads = [threading.Thread(target=client, args=(range(i + 1, keys + 1, 4),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up in {timeout:.0f}s")


def wait_log(path, pattern, timeout, since=0):
    """The first match of pattern in the file path from byte since."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, "rb") as f:
            f.seek(since)
            m = rx.search(f.read().decode("utf-8", "replace"))
        if m:
            return m
        time.sleep(0.02)
    raise RuntimeError(f"no '{pattern}' in {path} within {timeout}s")


def start_ringproxy(binary, cfg, log):
    """ringproxy -c cfg, its log in the file log (its listeners on port
    0); (its Popen, its port, its admin port)."""
    p = start([binary, "-c", cfg], log)
    port = int(wait_log(log, r"listening on 127\.0\.0\.1:(\d+)", 20).group(1))
    admin = int(wait_log(log, r"stats on http://127\.0\.0\.1:(\d+)/", 20).group(1))
    return p, port, admin


def start_varnish(name, vcl_text, tmp, storage):
    """One varnishd -F with its own working directory and -s storage
    (e.g. malloc,64m); its port."""
    wd = os.path.join(tmp, name)
    os.makedirs(wd, exist_ok=True)
    vcl = os.path.join(wd, "thumbs.vcl")
    with open(vcl, "w") as f:
        f.write(vcl_text)
    for _ in range(5):
        port = free_port()
        p = start(["varnishd", "-F", "-n", wd, "-a", f"127.0.0.1:{port}", "-f", vcl, "-s", storage,
                   "-T", "none", "-j", "none", "-l", "2m", "-p", "thread_pools=1", "-p", "thread_pool_min=10",
                   "-p", "thread_pool_max=200"], os.path.join(wd, "varnishd.log"), group=True)
        try:
            wait_for(lambda: p.poll() is None and get(port, "/health", 2)[0] == 200, 30, f"varnishd {name}")
            return port
        except RuntimeError:
            stop(p, True)
    raise RuntimeError(f"varnishd {name} did not start; see {wd}/varnishd.log")


def start_origin(tc, tmp, *options):
    """The origin: a testcache on a free port counting the fetches of the
    Zipf keys (/z/) apart from the rest, with testcache options; its port."""
    pf = os.path.join(tmp, "origin.port")
    start([tc, "--listen", "127.0.0.1:0", "--name", "origin", "--port-file", pf, "--count-prefix", "/z/",
           *options], os.path.join(tmp, "origin.log"))
    wait_for(lambda: os.path.exists(pf) and os.path.getsize(pf) > 0, 20, "the origin")
    with open(pf) as f:
        return int(f.read())


def varnish_vcl(path, origin):
    """The VCL text of path (tests/e2e/varnish.vcl) for the origin on
    127.0.0.1:origin, purges allowed from 127.0.0.1."""
    with open(path) as f:
        return (f.read().replace("@ORIGIN_HOST@", "127.0.0.1").replace("@ORIGIN_PORT@", str(origin))
                .replace("@RINGPROXY@", "127.0.0.1"))


def series(port):
    """The origin's /__series: its start (monotonic s), the slot length
    (s), and requests and Zipf-key requests per slot."""
    doc = json.loads(get(port, "/__series", timeout=30)[1])
    return doc["start_ms"] / 1000.0, doc["slot_ms"] / 1000.0, doc["requests"], doc["prefix_requests"]


def on_slot(port):
    """Sleep to the next boundary of the origin's 100 ms slots and return
    the time (monotonic): 1 s buckets from it are then whole slots."""
    o_start, slot, _, _ = series(port)
    time.sleep(slot - (time.monotonic() - o_start) % slot)
    return time.monotonic()


def reload_on_slot(proxy, cfg, text, log, origin):
    """The first reload of ringproxy (Popen proxy, logging to log): text
    written to cfg, SIGHUP on a boundary of the origin's slots; (that
    time, the log's 'reload 2:' line)."""
    with open(cfg, "w") as f:
        f.write(text)
    since = os.path.getsize(log)
    t = on_slot(origin)
    proxy.send_signal(signal.SIGHUP)
    return t, wait_log(log, r"reload 2: [^\n]*", 10, since).group(0)


def per_second(port, t0, first, last):
    """The origin's requests and Zipf-key requests in 1 s buckets from t0
    (a time on_slot gave): [(k, requests, zipf requests)] for the seconds
    k = first .. last - 1 from t0."""
    o_start, slot, req, zreq = series(port)
    r0 = round((t0 - o_start) / slot)
    per = round(1 / slot)

    def bucket(counts, k):
        return sum(counts[max(0, r0 + k * per):max(0, r0 + (k + 1) * per)])
    return [(k, bucket(req, k), bucket(zreq, k)) for k in range(first, last)]


def around(buckets):
    """per_second's buckets around a change at second 0 in figures: the
    origin's steady requests/s before it, its peak second after it and
    that peak over steady, all requests after it, and the Zipf-key
    fetches before it and after it (extra: the keys the change cost)."""
    before = [r for k, r, _ in buckets if k < 0]
    after = [r for k, r, _ in buckets if k >= 0]
    steady = sum(before) / len(before)
    return {"steady": steady, "peak": max(after), "over": max(after) - steady, "after_total": sum(after),
            "zipf_before": sum(z for k, _, z in buckets if k < 0), "extra": sum(z for k, _, z in buckets if k >= 0)}


ZIPF_LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zipf.lua")


def paced_zipf(keys, s, onehit, rate, conns, tag=""):
    """The arguments of ZIPF_LUA for Zipf(s) over keys keys (/z/1.jpg the
    hottest) paced at rate requests/s over conns connections, onehit of
    them for keys never asked before (by a run of another tag either)."""
    return ("zipf", str(keys), f"{s:g}", "/z/", f"{conns * 1000.0 / rate:g}", f"{onehit:g}", tag)


def start_wrk(port, secs, lua, conns, threads=1, args=(), host=None):
    """wrk against 127.0.0.1:port for secs s with the script lua (the
    script's arguments args) and the Host header host (None: wrk's own),
    in PROCS; read it with wrk_figures."""
    p = subprocess.Popen(["wrk", f"-t{threads}", f"-c{conns}", f"-d{secs}s", "--timeout", "5s", "-s", lua,
                          *(["-H", f"Host: {host}"] if host else []), f"http://127.0.0.1:{port}/",
                          *(["--", *args] if args else [])],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    PROCS.append((p, False))
    return p


def wrk_figures(out):
    """wrk's output: requests/s, requests, and its errors ('none' or the
    lines that report them)."""
    errors = re.findall(r"(Non-2xx or 3xx responses: \d+|Socket errors: [^\n]*)", out)
    return {"rps": float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1)),
            "total": int(re.search(r"(\d+) requests in", out).group(1)), "errors": "; ".join(errors) or "none"}
