"""benchproc.py -- processes for the Python bench drivers (ramp.py,
varnish-spill.py, replicas.py): start, stop by PID (varnishd by its process group),
free loopback ports, plain GETs, waiting for a condition or a log line,
one varnishd, the origin and its VCL, and a pass over every Zipf key. Every process started here is in PROCS until stopped."""

import http.client
import os
import re
import signal
import socket
import subprocess
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


def warm(port, keys):
    """GET every Zipf key once through the proxy (4 keep-alive clients)."""
    def client(part):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for k in part:
            c.request("GET", f"/z/{k}.jpg")
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


def start_origin(testcache, tmp, delay, prefix="/z/"):
    """The origin: a testcache answering after delay ms and counting its
    requests under prefix (/__stats prefix_requests); its port."""
    pf = os.path.join(tmp, "origin.port")
    start([testcache, "--listen", "127.0.0.1:0", "--name", "origin", "--port-file", pf,
           "--threads", "2", "--delay", str(delay), "--count-prefix", prefix],
          os.path.join(tmp, "origin.log"))
    wait_for(lambda: os.path.exists(pf) and os.path.getsize(pf) > 0, 20, "the origin")
    with open(pf) as f:
        return int(f.read())


def origin_vcl(vcl_path, origin):
    """The VCL of tests/e2e/varnish.vcl for caches in front of origin."""
    with open(vcl_path) as f:
        return (f.read().replace("@ORIGIN_HOST@", "127.0.0.1").replace("@ORIGIN_PORT@", str(origin))
                .replace("@RINGPROXY@", "127.0.0.1"))
