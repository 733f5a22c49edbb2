"""health_harness.py -- helpers of the balance and health end-to-end tests:
test caches and ringproxy on 127.0.0.1 (every process remembered and
stopped by its PID), a TAP reporter, HTTP GETs, and a bounded concurrent
load (count and time) of keep-alive clients. Python standard library only."""

import atexit
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ringref  # noqa: E402,F401

_procs = []
_failures = 0
_n = 0
TMP = tempfile.mkdtemp(prefix="rp-health-")


def check(cond, what, diag=None):
    global _failures, _n
    _n += 1
    print(("ok" if cond else "not ok"), _n, "-", what, flush=True)
    if not cond:
        _failures += 1
        if diag is not None:
            for line in str(diag).splitlines()[-30:]:
                print("#  ", line, flush=True)
    return cond


def done():
    stop_all()
    print(f"1..{_n}", flush=True)
    sys.exit(1 if _failures else 0)


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def stop(p, sig=signal.SIGTERM, timeout=10):
    """Stop one process by its PID; returns its exit status."""
    if p.poll() is None:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(5)
    if p in _procs:
        _procs.remove(p)
    return p.returncode


def stop_all():
    for p in list(_procs):
        stop(p, timeout=5)


atexit.register(stop_all)


class Cache:
    """One testcache; port 0 asks the kernel for a free port."""

    def __init__(self, exe, name, port=0, extra=()):
        self.exe, self.name = exe, name
        self.port_file = os.path.join(TMP, f"{name}.port")
        self.start(port, extra)

    def start(self, port=0, extra=()):
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.proc = subprocess.Popen(
            [self.exe, "--listen", f"127.0.0.1:{port}", "--name", self.name,
             "--port-file", self.port_file, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _procs.append(self.proc)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.port_file):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"testcache {self.name} did not start")
            time.sleep(0.01)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())

    def kill9(self):
        stop(self.proc, signal.SIGKILL)

    def stop(self):
        stop(self.proc)

    def admin(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    def stats(self):
        return json.loads(self.admin("/__stats")[1])

    def reset(self):
        self.admin("/__reset")


class Proxy:
    """ringproxy -c FILE in the foreground; its stderr is collected."""

    def __init__(self, exe, conf_text, name="rp.ini"):
        self.conf = write(name, conf_text)
        self.proc = subprocess.Popen([exe, "-c", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        _procs.append(self.proc)
        self.lines = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        m = self.wait_log(r"listening on 127\.0\.0\.1:(\d+)", 15)
        if not m:
            stop(self.proc)
            raise RuntimeError("ringproxy did not start:\n" + self.log())
        self.port = int(m.group(1))

    def _read(self):
        for line in self.proc.stderr:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def log(self):
        with self.lock:
            return "\n".join(self.lines)

    def wait_log(self, pattern, timeout, start=0):
        """The first match of pattern in log lines from index start on."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                for line in self.lines[start:]:
                    m = rx.search(line)
                    if m:
                        return m
            if time.monotonic() > deadline or self.proc.poll() is not None:
                return None
            time.sleep(0.02)

    def mark(self):
        with self.lock:
            return len(self.lines)

    def stop(self):
        return stop(self.proc)


def conf(caches, ring="", health="", proxy="", backend_extra=None, vnodes=160, workers=2,
         log_level="info"):
    s = f"[proxy]\nlisten = 127.0.0.1:0\nworkers = {workers}\nlog_level = {log_level}\n{proxy}\n"
    s += f"[ring]\nvnodes = {vnodes}\n{ring}\n[health]\n{health}\n"
    for c in caches:
        extra = (backend_extra or {}).get(c.name, "")
        s += f"\n[backend {c.name}]\nurl = http://127.0.0.1:{c.port}\n{extra}\n"
    return s


def get(port, path, timeout=10):
    """(status, headers dict lower-case, body) of one GET on a new connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        c.close()


def load(port, pick_path, clients=64, seconds=3.0, max_requests=20000, timeout=10):
    """clients threads, each with one keep-alive connection, GET pick_path(i)
    until seconds pass or max_requests were sent in all. Returns a list of
    (path, status, backend header, retry-after header or None); a request
    that failed without a response is (path, 0, error text, None)."""
    results = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    count = [0]

    def client(cid):
        conn = None
        i = 0
        while time.monotonic() < deadline:
            with lock:
                if count[0] >= max_requests:
                    return
                count[0] += 1
            path = pick_path(cid * 1000003 + i)
            i += 1
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                res = (path, r.status, r.getheader("X-Ringproxy-Backend"), r.getheader("Retry-After"))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                res = (path, 0, f"{type(e).__name__}: {e}", None)
                if conn is not None:
                    conn.close()
                conn = None
            with lock:
                results.append(res)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout + 5)
    with lock:
        return list(results)
