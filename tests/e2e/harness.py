"""harness.py -- shared plumbing of the end-to-end tests: test caches and
ringproxy on 127.0.0.1 (ports from the kernel), configs, a TAP reporter,
the proxy's log (waits, reloads, signals, /proc readings), client loads,
and a small raw HTTP/1.1 response reader for what http.client hides
(pipelining, framing, interim responses, connection close).

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
import traceback

_procs = []
LOGS = []  # every ringproxy's stderr file; a test adds files its log_file used
TMP = tempfile.mkdtemp(prefix="rp-e2e-")


def stop_pid(p, sig=signal.SIGTERM, timeout=10):
    """Stop one process by its PID with sig (SIGKILL after timeout s);
    its exit status, None if it had to be killed."""
    if p.poll() is None:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
            return None
    return p.returncode


def stop_all():
    """Kill every process still running (at exit, or after a test failed)."""
    for p in _procs:
        if p.poll() is None:
            p.kill()
    for p in _procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


atexit.register(stop_all)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


def cli_args():
    """RINGPROXY TESTCACHE from the command line, as absolute paths."""
    if len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} RINGPROXY TESTCACHE")
    return os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def tmp_path(name):
    """A path in this run's temporary directory."""
    return os.path.join(TMP, name)


def write(name, text):
    """Write text to tmp_path(name) by renaming a whole file over it (a
    reload never sees half a file); returns the path."""
    path = tmp_path(name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)
    return path


def wait_until(pred, timeout, step=0.05):
    """pred()'s first true value within timeout s, else its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)


# ---- TAP ------------------------------------------------------------------

class Tap:
    """TAP output: numbered checks, diagnostics, the plan at the end."""

    def __init__(self):
        self.n = 0
        self.failures = 0

    def check(self, cond, what, detail=None):
        """One test line; on failure, detail (up to 30 lines) follows."""
        self.n += 1
        print(("ok" if cond else "not ok"), self.n, "-", what, flush=True)
        if not cond:
            self.failures += 1
            if detail is not None:
                lines = str(detail).splitlines()
                if len(lines) > 30:
                    lines = lines[:10] + ["..."] + lines[-20:]
                self.note("\n".join(lines))
        return bool(cond)

    def skip(self, what, why):
        """A test line that was not run, and why."""
        self.n += 1
        print(f"ok {self.n} - {what} # SKIP {why}", flush=True)

    def note(self, text):
        """Diagnostic lines."""
        for line in str(text).splitlines() or [""]:
            print("#", line, flush=True)

    def done(self):
        """The plan; exit 1 if any check failed."""
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failures else 0)


def sanitizer_reports():
    """Lines where a sanitizer spoke in any file of LOGS: ASan, LSan and
    TSan ("WARNING: ThreadSanitizer: data race", and clang 14's
    "ThreadSanitizer: CHECK failed" when it breaks while reporting), and
    UBSan's "runtime error:" (without halt_on_error it only prints and
    carries on; so does TSan, which exits 66 only at the end)."""
    out = []
    for path in LOGS:
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        out += [f"{os.path.basename(path)}: {line}" for line in text.splitlines()
                if "runtime error:" in line or "Sanitizer" in line]
    return out


def run_main(t, main):
    """Run main() (an exception is a failed check with its traceback),
    stop every process, check that no proxy's log holds a sanitizer
    report, print the plan and exit."""
    try:
        main()
    except Exception as e:  # report, do not hang
        t.check(False, f"unexpected {type(e).__name__}: {e}", traceback.format_exc())
    finally:
        stop_all()
    reports = sanitizer_reports()
    for r in reports[:20]:
        t.note(r)
    t.check(not reports, "no sanitizer report in any ringproxy's stderr")
    t.done()


# ---- test caches and configs --------------------------------------------------

def body_for(uri, size=4096):
    """testcache's documented body: (URI + "\\n") repeated, cut to size."""
    pat = (uri + "\n").encode()
    return (pat * (size // len(pat) + 1))[:size]


def fnv1a(data, h=2166136261):
    """32-bit FNV-1a of data (bytes), as testcache's X-Body-FNV1a."""
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


class Cache:
    """One testcache on 127.0.0.1, port chosen by the kernel; extra are
    more testcache arguments."""

    def __init__(self, exe, name, *extra):
        self.exe, self.name, self.extra = exe, name, extra
        self.start()

    def start(self, port=0):
        """Start it (again): port 0 for a free port, or the port it had."""
        pf = tmp_path(f"{self.name}.{time.monotonic_ns()}.port")
        self.proc = subprocess.Popen([self.exe, "--listen", f"127.0.0.1:{port}", "--name", self.name,
                                      "--port-file", pf, *self.extra],
                                     stdout=subprocess.DEVNULL)
        _procs.append(self.proc)
        deadline = time.monotonic() + 20
        while not os.path.exists(pf):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"testcache {self.name} did not start")
            time.sleep(0.01)
        with open(pf) as f:
            self.port = int(f.read())

    def admin(self, path):
        """The body of a GET of one of its /__ admin paths."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path)
            return c.getresponse().read()
        finally:
            c.close()

    def stats(self):
        """/__stats as a dict."""
        return json.loads(self.admin("/__stats"))

    def reset(self):
        """/__reset: counters to zero."""
        self.admin("/__reset")

    def stop(self):
        """SIGTERM; its exit status."""
        return stop_pid(self.proc)

    def kill9(self):
        """SIGKILL: gone without closing anything."""
        return stop_pid(self.proc, signal.SIGKILL)


def conf_text(caches, proxy=None, ring=None, health=None, backend=None):
    """A config: [proxy] listening on port 0 with 2 workers, updated by
    proxy's keys; [ring] with ring's keys; [health] with health's if any;
    one [backend NAME] per cache (a Cache, or (name, port)) with the keys
    of backend[NAME] after its url."""
    opts = {"listen": "127.0.0.1:0", "workers": 2}
    opts.update(proxy or {})
    s = "[proxy]\n" + "".join(f"{k} = {v}\n" for k, v in opts.items())
    s += "\n[ring]\n" + "".join(f"{k} = {v}\n" for k, v in (ring or {}).items())
    if health:
        s += "\n[health]\n" + "".join(f"{k} = {v}\n" for k, v in health.items())
    for c in caches:
        name, port = (c.name, c.port) if isinstance(c, Cache) else c
        s += f"\n[backend {name}]\nurl = http://127.0.0.1:{port}\n"
        s += "".join(f"{k} = {v}\n" for k, v in (backend or {}).get(name, {}).items())
    return s


def conf_by_name(names, ports, ring=None, **kw):
    """conf_text for the caches names at ports ({name: port}), with bounded
    loads off (exact routing) unless ring says otherwise."""
    return conf_text([(n, ports[n]) for n in names], ring=ring or {"balance_factor": 0}, **kw)


# ---- ringproxy ----------------------------------------------------------------

_sanitizer_cache = {}


def sanitizer_of(exe):
    """The sanitizer exe was built with: "thread", "address" or None.
    Read from the binary itself, so that no test needs telling: clang
    links TSan's runtime statically (its __tsan_init is in the file, and
    no library shows in /proc/PID/maps), gcc links libasan dynamically
    (the file names __asan_init as an import)."""
    if exe not in _sanitizer_cache:
        with open(exe, "rb") as f:
            data = f.read()
        _sanitizer_cache[exe] = ("thread" if b"__tsan_init" in data else
                                 "address" if b"__asan_init" in data else None)
    return _sanitizer_cache[exe]


def time_scale(exe):
    """How much longer than a plain (or ASan) build exe may take for what a
    test times with a tight window: 4 under TSan, whose instrumented
    loads and stores make the proxy's own work 5-15 times slower, else 1.
    For windows that measure the proxy's speed, never for its timeouts
    (those it keeps by the clock whatever the build)."""
    return 4 if sanitizer_of(exe) == "thread" else 1


class Proxy:
    """ringproxy -c FILE in the foreground; its stderr goes to a file that
    is parsed for the port and read back as its log."""

    LISTEN_RE = r"info: listening on 127\.0\.0\.1:(\d+) with"

    def __init__(self, exe, conf=None, tag="proxy", *, path=None, nofile=None, env=None,
                 log_file=None, stack=None):
        """conf: the config's text, written to a new file named after tag;
        or path: a config file the test keeps (and changes for reloads).
        nofile: an
        RLIMIT_NOFILE for the proxy; stack: an RLIMIT_STACK in bytes (glibc
        also sizes thread stacks by it); env: more environment variables;
        log_file: the config's [proxy] log_file, then where the log is read."""
        self.exe = exe
        self.sanitizer = sanitizer_of(exe)
        self.conf = path or write(f"{tag}.{time.monotonic_ns()}.ini", conf)
        self.stderr_path = tmp_path(f"{tag}.{time.monotonic_ns()}.log")
        self.log_path = log_file or self.stderr_path
        LOGS.append(self.stderr_path)
        e = dict(os.environ, **(env or {}))

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            if stack:
                resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))

        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([exe, "-c", self.conf], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=e,
                                         preexec_fn=limit)
        _procs.append(self.proc)
        self.pid = self.proc.pid
        m = self.wait_log(self.LISTEN_RE, timeout=30)
        if not m:
            stop_pid(self.proc)
            raise RuntimeError("ringproxy did not start:\n" + self.log())
        self.port = int(m.group(1))

    # -- the log

    def log(self):
        """The log so far (stderr, or the log_file being read)."""
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_size(self):
        """The log's length in bytes: a mark for wait_log's since."""
        return os.path.getsize(self.log_path)

    def wait_log(self, pattern, timeout=10, since=0, path=None):
        """The first match of pattern in the log (or the file path) from
        byte offset since, waiting up to timeout s; None if none came or
        the proxy exited."""
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
            if time.monotonic() > deadline or self.proc.poll() is not None:
                return None
            time.sleep(0.005)

    # -- signals and the process

    def signal(self, sig):
        """Send sig to the proxy."""
        os.kill(self.pid, sig)

    def reload(self, timeout=10):
        """SIGHUP; waits for this reload's outcome line; returns it (or None)."""
        since = self.log_size()
        self.signal(signal.SIGHUP)
        m = self.wait_log(r"(reload \d+: [^\n]*|reload failed: [^\n]*)\n", timeout=timeout,
                          since=since)
        return m.group(1) if m else None

    def alive(self):
        """True while the process runs."""
        return self.proc.poll() is None

    def wait(self, timeout):
        """Its exit status once it exits within timeout s, else None."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout=30):
        """SIGTERM; the exit status (None if it had to be killed)."""
        return stop_pid(self.proc, timeout=timeout)

    def sanitized(self):
        """True when the binary runs with ASan (its runtime is mapped) or
        TSan (built in: sanitizer_of), or RINGPROXY_SANITIZED=1 says so:
        then RSS says little (ASan's quarantine holds freed memory, TSan's
        allocator keeps it and its shadow grows with every page touched)."""
        if os.environ.get("RINGPROXY_SANITIZED") == "1" or self.sanitizer:
            return True
        with open(f"/proc/{self.pid}/maps") as f:
            return "libasan" in f.read()

    def tsan(self):
        """True for a ThreadSanitizer build."""
        return self.sanitizer == "thread"

    # -- /proc readings

    def rss_kb(self):
        """Resident set size in kB."""
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
        """The number of open fds."""
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

    # -- clients

    def http(self, timeout=30):
        """A new http.client connection to the proxy."""
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(self, path, method="GET", headers=None, body=None, timeout=30):
        """get() on the proxy's port."""
        return get(self.port, path, method, headers, body, timeout)

    def sock(self, timeout=30):
        """A new raw socket connected to the proxy."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)


# ---- clients ----------------------------------------------------------------

def get(port, path, method="GET", headers=None, body=None, timeout=30):
    """One request on a new connection: (status, headers dict lower-case, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def request_id(body):
    """The request id in a reply of the proxy's own ("... (request ID)"),
    or None."""
    m = re.search(rb"\(request ([0-9a-f]{20})\)\n$", body or b"")
    return m.group(1).decode() if m else None


def get_on(conn, path):
    """One GET on an open keep-alive connection: (status, backend, body)."""
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    return r.status, r.getheader("X-Ringproxy-Backend"), body


def backends_of(port, paths, deadline):
    """{path: backend (or "status N")} through the proxy on one keep-alive
    connection, as many paths as fit before deadline (monotonic)."""
    out = {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for p in paths:
            if time.monotonic() > deadline:
                break
            st, be, _ = get_on(conn, p)
            out[p] = be if st == 200 else f"status {st}"
    finally:
        conn.close()
    return out


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


# ---- raw responses ------------------------------------------------------------

class Resp:
    """One response as read by Reader: status line, headers as sent,
    body, and how the body was framed."""

    def __init__(self, version, status, reason, headers, body, framing):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value) as sent
        self.body = body
        self.framing = framing          # "length", "chunked", "close", "none"

    def h(self, name, default=None):
        """The first value of header name (any case), or default."""
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default


class Reader:
    """Reads responses from a socket, buffering what follows."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        """Read more into the buffer; False at EOF."""
        if self.eof:
            return False
        d = self.s.recv(262144)
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def line(self):
        """The next CRLF-terminated line, without the CRLF."""
        while b"\r\n" not in self.buf:
            if not self._fill():
                raise EOFError("connection closed in a head")
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln.decode("latin-1")

    def exact(self, n):
        """The next n bytes."""
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError(f"connection closed with {n - len(self.buf)} body bytes missing")
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def rest(self):
        """Everything until the peer closes."""
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

    def __init__(self, handler):
        self.handler = handler
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.conns = 0
        self.lock = threading.Lock()
        self.socks = []
        self.th = threading.Thread(target=self._accept, daemon=True)
        self.th.start()

    def _accept(self):
        """Accept connections until stop(), a handler thread each."""
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
        """Run the handler on one connection, then close it."""
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
        return head, rest

    def stop(self):
        """Stop listening and close every accepted connection."""
        self.ls.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass

