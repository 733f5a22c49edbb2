"""reload_harness.py -- helpers for the reload/stop/notify e2e tests: TAP
output, test caches and a ringproxy started on 127.0.0.1 with free ports,
its log read back from a file, keep-alive clients, /proc readings.
Python 3 standard library only. Every process is stopped by its PID."""

import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
import time



class Tap:
    def __init__(self):
        self.n = 0
        self.failures = 0

    def check(self, cond, what):
        self.n += 1
        print(("ok" if cond else "not ok"), self.n, "-", what, flush=True)
        if not cond:
            self.failures += 1
        return cond

    def diag(self, text):
        for line in str(text).splitlines():
            print("#", line, flush=True)

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failures else 0)


class Procs:
    """Every process a test starts, stopped by PID at the end."""

    def __init__(self):
        self.procs = []
        self.logs = []  # every ringproxy's stderr file
        self.tmp = tempfile.mkdtemp(prefix="rp-reload-")

    def add(self, p):
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def sanitizer_reports(self):
        """Lines where ASan/UBSan/LSan spoke in any ringproxy stderr (UBSan
        without halt_on_error only prints and carries on)."""
        out = []
        for path in self.logs:
            try:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            out += [f"{os.path.basename(path)}: {l}" for l in text.splitlines()
                    if "runtime error:" in l or "Sanitizer" in l]
        return out

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, text):
        path = self.path(name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)  # a reload never sees half a file
        return path


def start_caches(procs, testcache, names, timeout=15):
    """Start one testcache per name; returns {name: port}."""
    ports = {}
    pending = []
    for name in names:
        pf = procs.path(f"port-{name}")
        p = procs.add(subprocess.Popen(
            [testcache, "--listen", "127.0.0.1:0", "--name", name, "--port-file", pf],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        pending.append((name, pf, p))
    deadline = time.monotonic() + timeout
    for name, pf, p in pending:
        while not os.path.exists(pf):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"testcache {name} did not start")
            time.sleep(0.01)
        with open(pf) as f:
            ports[name] = int(f.read().strip())
    return ports


def conf_text(backends, ports, proxy=None, ring=None, vnodes=160, health=None):
    """backends: list of names or (name, weight); ports: {name: port};
    proxy, ring, health: {key: value} for those sections."""
    proxy = dict(proxy or {})
    proxy.setdefault("listen", "127.0.0.1:0")
    proxy.setdefault("workers", "2")
    ring = dict(ring or {})
    ring.setdefault("vnodes", str(vnodes))
    ring.setdefault("balance_factor", "0")
    s = "[proxy]\n" + "".join(f"{k} = {v}\n" for k, v in proxy.items())
    s += "\n[ring]\n" + "".join(f"{k} = {v}\n" for k, v in ring.items())
    if health:
        s += "\n[health]\n" + "".join(f"{k} = {v}\n" for k, v in health.items())
    for b in backends:
        name, weight = (b, 1) if isinstance(b, str) else b
        s += f"\n[backend {name}]\nurl = http://127.0.0.1:{ports[name]}\nweight = {weight}\n"
    return s


class Proxy:
    """A ringproxy in the foreground, its stderr in a file we read back."""

    def __init__(self, procs, exe, conf, env=None, log=None, timeout=20, log_file=None):
        """log: where stderr goes; log_file: the config's [proxy] log_file,
        if any, which is then where the log is read."""
        self.log_path = log or procs.path(f"ringproxy-{len(procs.procs)}.log")
        self.logf = open(self.log_path, "ab")
        procs.logs.append(self.log_path)
        e = dict(os.environ)
        e.update(env or {})
        self.p = procs.add(subprocess.Popen([exe, "-c", conf], stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=self.logf, env=e))
        self.pid = self.p.pid
        self.stderr_path = self.log_path
        if log_file:
            self.log_path = log_file
        m = self.wait_log(r"listening on 127\.0\.0\.1:(\d+) with", timeout=timeout)
        if not m:
            raise RuntimeError("ringproxy did not start:\n" + self.log())
        self.port = int(m.group(1))

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_size(self):
        return os.path.getsize(self.log_path)

    def wait_log(self, pattern, timeout=10, since=0, path=None):
        """The first match of pattern in the log from byte offset since."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(path or self.log_path, "rb") as f:
                    f.seek(since)
                    m = rx.search(f.read().decode("utf-8", "replace"))
            except FileNotFoundError:  # a log_file not created yet
                m = None
            if m:
                return m
            if time.monotonic() > deadline or self.p.poll() is not None:
                return None
            time.sleep(0.005)

    def signal(self, sig):
        os.kill(self.pid, sig)

    def reload(self, timeout=10):
        """SIGHUP; waits for this reload's outcome line; returns it (or None)."""
        since = self.log_size()
        self.signal(signal.SIGHUP)
        m = self.wait_log(r"(reload \d+: [^\n]*|reload failed: [^\n]*)\n", timeout=timeout,
                          since=since)
        return m.group(1) if m else None

    def sanitized(self):
        """True when the binary runs with ASan (its runtime is mapped) or
        RINGPROXY_SANITIZED=1 says so."""
        if os.environ.get("RINGPROXY_SANITIZED") == "1":
            return True
        with open(f"/proc/{self.pid}/maps") as f:
            return "libasan" in f.read()

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def fd_kinds(self):
        """{kind: count}: 'socket', 'anon_inode:[eventpoll]', files by path."""
        kinds = {}
        d = f"/proc/{self.pid}/fd"
        for fd in os.listdir(d):
            try:
                k = os.readlink(os.path.join(d, fd))
            except OSError:
                continue
            k = "socket" if k.startswith("socket:") else k
            kinds[k] = kinds.get(k, 0) + 1
        return kinds

    def rss_kb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None


def get(conn, path, timeout=10):
    """One GET on a keep-alive connection: (status, backend, body)."""
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    return r.status, r.getheader("X-Ringproxy-Backend"), body


def backends_of(port, paths, deadline):
    """{path: backend} through the proxy on one keep-alive connection."""
    out = {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for p in paths:
            if time.monotonic() > deadline:
                break
            st, be, _ = get(conn, p)
            out[p] = be if st == 200 else f"status {st}"
    finally:
        conn.close()
    return out
