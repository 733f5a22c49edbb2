"""proc.py -- processes and TAP for the end-to-end tests: every process a
test starts is registered here and stopped by PID at exit, even when a
test dies half-way; this run's temporary directory; the TAP reporter,
which ends every program with a check that no ringproxy it started wrote
a sanitizer report to its stderr; and the ringproxy process itself
(Proxy: its log, reloads, signals, /proc readings). Standard library
only."""

import atexit
import http.client
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

from client import get

_procs = []
_proxies = []  # the ringproxy processes among them, stopped gently at the end
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


def free_port():
    """A free 127.0.0.1 port from the kernel, released for a program that
    cannot take port 0 or print the one it got (nginx, haproxy,
    nutcracker, varnishd), or for a config naming a port nobody
    listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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


def lines_until(path, enough, timeout=5):
    """The lines of the file at path once enough(lines) is true (a log
    written in batches, e.g. the access log every 100 ms), or what it
    has after timeout s; [] while it does not exist."""
    got = []

    def read():
        nonlocal got
        try:
            with open(path) as f:
                got = f.read().splitlines()
        except FileNotFoundError:
            got = []
        return enough(got)
    wait_until(read, timeout)
    return got


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
        """End the program: stop what still runs (ringproxy with SIGTERM, so
        that LeakSanitizer reports at its exit), check that no ringproxy's
        stderr holds a sanitizer report, print the plan; exit 1 if any
        check failed."""
        for p in _proxies:
            stop_pid(p, timeout=30)
        stop_all()
        reports = sanitizer_reports()
        for r in reports[:20]:
            self.note(r)
        self.check(not reports, "no sanitizer report in any ringproxy's stderr")
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
    then end with t.done() (which stops every process and checks the
    proxies' stderr for sanitizer reports)."""
    try:
        main()
    except Exception as e:  # report, do not hang
        t.check(False, f"unexpected {type(e).__name__}: {e}", traceback.format_exc())
    t.done()


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
                 log_file=None, stack=None, extra_args=(), wrap=(), stderr_path=None):
        """conf: the config's text, written to a new file named after tag;
        or path: a config file the test keeps (and changes for reloads).
        nofile: an
        RLIMIT_NOFILE for the proxy; stack: an RLIMIT_STACK in bytes (glibc
        also sizes thread stacks by it); env: more environment variables;
        log_file: the config's [proxy] log_file, then where the log is read;
        extra_args: more command-line arguments (--share-listen); wrap: a
        command that execs the rest (so the PID stays the proxy's);
        stderr_path: the file its stderr goes to (default: a new one)."""
        self.exe = exe
        self.sanitizer = sanitizer_of(exe)
        self.conf = path or write(f"{tag}.{time.monotonic_ns()}.ini", conf)
        self.stderr_path = stderr_path or tmp_path(f"{tag}.{time.monotonic_ns()}.log")
        self.log_path = log_file or self.stderr_path
        LOGS.append(self.stderr_path)
        e = dict(os.environ, **(env or {}))

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            if stack:
                resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))

        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([*wrap, exe, "-c", self.conf, *extra_args], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=e,
                                         preexec_fn=limit)
        _procs.append(self.proc)
        _proxies.append(self.proc)
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

    def admin_port(self, host="127.0.0.1", timeout=10):
        """The admin listener's port, from its "stats on" log line."""
        m = self.wait_log(r"stats on http://" + re.escape(host) + r":(\d+)/", timeout)
        if not m:
            raise RuntimeError("no admin listener line:\n" + self.log())
        return int(m.group(1))

    def wait_checked(self, names, timeout=10, since=0):
        """With active checks on, a backend takes traffic once its first
        check passed (it starts 'checking', at a start or when a reload
        adds it): wait for each of names to leave that state, in the log
        from byte offset since; True when all did within timeout s."""
        deadline = time.monotonic() + timeout
        for n in names:
            left = max(0.0, deadline - time.monotonic())
            if self.wait_log(rf"backend {re.escape(n)}: checking -> ", left, since) is None:
                return False
        return True

    # -- signals and the process

    def signal(self, sig):
        """Send sig to the proxy."""
        os.kill(self.pid, sig)

    def reload(self, timeout=10):
        """SIGHUP; waits for this reload's outcome line; returns it (or None)."""
        since = self.log_size()
        self.signal(signal.SIGHUP)
        m = self.wait_log(r": (reload \d+: [^\n]*|reload failed: [^\n]*)\n", timeout=timeout,
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
