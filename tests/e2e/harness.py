"""harness.py -- shared plumbing of the end-to-end tests: test caches and a
ringproxy on 127.0.0.1 (ports from the kernel), a TAP reporter, and a small
raw HTTP/1.1 response reader for what http.client hides (pipelining,
framing, interim responses, connection close).

Every process started here is registered and stopped by PID at exit, even
when a test dies half-way. Standard library only."""

import atexit
import http.client
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

_procs = []
TMP = tempfile.mkdtemp(prefix="rp-e2e-")


def _cleanup():
    for p in _procs:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=10)
            except Exception:
                pass


atexit.register(_cleanup)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


# ---- TAP ------------------------------------------------------------------

class Tap:
    def __init__(self):
        self.n = 0
        self.failures = 0

    def check(self, cond, what, detail=None):
        self.n += 1
        print(("ok" if cond else "not ok"), self.n, "-", what, flush=True)
        if not cond:
            self.failures += 1
            if detail is not None:
                for line in str(detail).splitlines()[:20]:
                    print("#", line, flush=True)
        return bool(cond)

    def note(self, text):
        print("#", text, flush=True)

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failures else 0)


# ---- processes --------------------------------------------------------------

def body_for(uri, size=4096):
    """testcache's documented body: (URI + "\\n") repeated, cut to size."""
    pat = (uri + "\n").encode()
    return (pat * (size // len(pat) + 1))[:size]


def fnv1a(data, h=2166136261):
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


class Cache:
    """One testcache on 127.0.0.1, port chosen by the kernel."""

    def __init__(self, exe, name, *extra):
        self.name = name
        pf = os.path.join(TMP, f"{name}.{os.getpid()}.{time.monotonic_ns()}.port")
        self.proc = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--name", name,
                                      "--port-file", pf, *extra],
                                     stdout=subprocess.DEVNULL)
        _procs.append(self.proc)
        deadline = time.monotonic() + 20
        while not os.path.exists(pf):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"testcache {name} did not start")
            time.sleep(0.01)
        with open(pf) as f:
            self.port = int(f.read())

    def admin(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path)
            return c.getresponse().read()
        finally:
            c.close()

    def stats(self):
        return json.loads(self.admin("/__stats"))

    def reset(self):
        self.admin("/__reset")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def conf_text(caches, proxy=None, ring=None, health=None):
    """A config: [proxy] listen on port 0 plus proxy's keys, [ring] with
    ring's keys, [health] with health's, one [backend NAME] per cache (a
    Cache, or (name, port))."""
    s = "[proxy]\nlisten = 127.0.0.1:0\n"
    opts = {"workers": 2}
    opts.update(proxy or {})
    for k, v in opts.items():
        s += f"{k} = {v}\n"
    s += "\n[ring]\n"
    for k, v in (ring or {}).items():
        s += f"{k} = {v}\n"
    if health:
        s += "\n[health]\n"
        for k, v in health.items():
            s += f"{k} = {v}\n"
    for c in caches:
        name, port = (c.name, c.port) if isinstance(c, Cache) else c
        s += f"\n[backend {name}]\nurl = http://127.0.0.1:{port}\n"
    return s


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class Proxy:
    """ringproxy -c FILE in the foreground; its stderr goes to a file that
    is parsed for the port."""

    LISTEN_RE = re.compile(r"info: listening on 127\.0\.0\.1:(\d+) with")

    def __init__(self, exe, conf, tag="proxy", nofile=None):
        """nofile: an RLIMIT_NOFILE for the proxy."""
        self.conf = write(f"{tag}.{time.monotonic_ns()}.ini", conf)
        self.logpath = self.conf + ".log"
        self.log = open(self.logpath, "wb")

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen([exe, "-c", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=self.log, preexec_fn=limit)
        _procs.append(self.proc)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        self.port = None
        while self.port is None:
            m = self.LISTEN_RE.search(self.logtext())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ringproxy did not start:\n" + self.logtext())
            else:
                time.sleep(0.01)

    def logtext(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def rss_kb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def cpu_ticks(self):
        """User + system CPU time so far, in clock ticks."""
        with open(f"/proc/{self.pid}/stat") as f:
            col = f.read().rsplit(") ", 1)[1].split()
        return int(col[11]) + int(col[12])

    def nfds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def client_fds(self):
        """Open fds that are not connections to a backend (pooled
        keep-alive connections come and go legitimately): listeners,
        client connections, the proxy's own files."""
        inodes = []
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                inodes.append(os.readlink(f"/proc/{self.pid}/fd/{fd}"))
            except OSError:
                pass
        remote = {}
        for tab in ("tcp", "tcp6"):
            try:
                with open(f"/proc/{self.pid}/net/{tab}") as f:
                    next(f)
                    for line in f:
                        col = line.split()
                        lport = int(col[1].split(":")[1], 16)
                        remote[f"socket:[{col[9]}]"] = (lport, col[3])
            except OSError:
                pass
        # a backend connection: established (01) and its local port is not ours
        return sum(1 for i in inodes
                   if not (i in remote and remote[i][0] != self.port and remote[i][1] == "01"))

    def settled_client_fds(self, timeout=5):
        """client_fds() once the proxy has closed connections that clients
        just closed (two equal readings 0.2 s apart)."""
        prev = self.client_fds()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.2)
            cur = self.client_fds()
            if cur == prev:
                break
            prev = cur
        return prev

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM; the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                return None
        self.log.close()
        return self.proc.returncode

    def http(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(self, path, method="GET", headers=None, body=None, timeout=30):
        """One request on a new connection: (status, headers dict lower-case, body)."""
        c = self.http(timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def sock(self, timeout=30):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return s


def wait_until(pred, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)


# ---- raw responses ------------------------------------------------------------

class Resp:
    def __init__(self, version, status, reason, headers, body, framing):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value) as sent
        self.body = body
        self.framing = framing          # "length", "chunked", "close", "none"

    def h(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def hall(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]


class Reader:
    """Reads responses from a socket, buffering what follows."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        if self.eof:
            return False
        d = self.s.recv(262144)
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def line(self):
        while b"\r\n" not in self.buf:
            if not self._fill():
                raise EOFError("connection closed in a head")
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln.decode("latin-1")

    def exact(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError(f"connection closed with {n - len(self.buf)} body bytes missing")
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def rest(self):
        while self._fill():
            pass
        d, self.buf = self.buf, b""
        return d

    def closed(self, timeout=5):
        """True when the peer closes with nothing more to read."""
        if self.buf:
            return False
        self.s.settimeout(timeout)
        try:
            return not self._fill()
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def response(self, head_only=False):
        """The next response (interim ones included: the caller skips them)."""
        st = self.line()
        ver, code, *reason = st.split(" ", 2)
        status = int(code)
        headers = []
        while True:
            ln = self.line()
            if ln == "":
                break
            k, _, v = ln.partition(":")
            headers.append((k, v.strip()))
        r = Resp(ver, status, reason[0] if reason else "", headers, b"", "none")
        te = r.h("transfer-encoding")
        cl = r.h("content-length")
        if head_only or status < 200 or status in (204, 304):
            return r
        if te is not None and "chunked" in te.lower():
            r.framing = "chunked"
            parts = []
            while True:
                size = int(self.line().split(";")[0].strip(), 16)
                if size == 0:
                    while self.line() != "":
                        pass
                    break
                parts.append(self.exact(size))
                if self.exact(2) != b"\r\n":
                    raise ValueError("bad chunk end")
            r.body = b"".join(parts)
        elif cl is not None:
            r.framing = "length"
            r.body = self.exact(int(cl))
        else:
            r.framing = "close"
            r.body = self.rest()
        return r


def raw(port, data, n=1, timeout=30, head_only=False):
    """Send data on a new connection, read n responses (interim ones
    skipped). Returns (responses, reader) -- the socket still open."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    rd = Reader(s)
    out = []
    while len(out) < n:
        r = rd.response(head_only=head_only)
        if r.status >= 200:
            out.append(r)
    return out, rd


class Fake:
    """A scripted backend on 127.0.0.1: handler(fake, sock, conn_no) runs
    in a thread per accepted connection and speaks raw bytes. For what
    testcache cannot do: broken framing, stale keep-alive connections."""

    def __init__(self, handler, name="fake"):
        self.name = name
        self.handler = handler
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.conns = 0
        self.heads = []          # every request head read with read_head
        self.lock = threading.Lock()
        self.socks = []
        self.th = threading.Thread(target=self._accept, daemon=True)
        self.th.start()

    def _accept(self):
        while True:
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
                n = self.conns
                self.socks.append(s)
            threading.Thread(target=self._run, args=(s, n), daemon=True).start()

    def _run(self, s, n):
        try:
            s.settimeout(30)
            self.handler(self, s, n)
        except OSError:
            pass
        finally:
            s.close()

    def read_head(self, s, buf=b""):
        """The next request head on s (b"" at EOF), and bytes after it."""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return b"", b""
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        with self.lock:
            self.heads.append(head)
        return head, rest

    def stop(self):
        self.ls.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass


def cli_args():
    """RINGPROXY TESTCACHE [SOURCE_ROOT] from the command line."""
    if len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} RINGPROXY TESTCACHE")
    return os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
