"""fakes.py -- scripted fake backends for what testcache cannot do
(broken framing, stale keep-alive connections, recording what arrives),
and a syslog receiver.
Standard library only."""

import os
import re
import socket
import threading
import time


def recv_line(s, buf):
    """The next CRLF-ended line of the stream on s, buf holding what was
    read of it already: (line without its CRLF, the bytes after it), or
    (None, buf) at EOF before a whole line."""
    while b"\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    line, _, rest = buf.partition(b"\r\n")
    return line, rest


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

    def requests(self, s):
        """Each request on s until EOF: (method, target, head, headers
        lower-case, body), the body read by its Content-Length or decoded
        from chunked (no trailers: ringproxy forwards none)."""
        rest = b""
        while True:
            head, rest = self.read_head(s, rest)
            if not head:
                return
            h = {k.strip().lower(): v.strip() for k, _, v in
                 (ln.partition(":") for ln in head.decode("latin-1").split("\r\n")[1:])}
            body = b""
            if h.get("transfer-encoding", "").lower() == "chunked":
                size = -1
                while size != 0:
                    line, rest = recv_line(s, rest)
                    if line is None:
                        return
                    size = int(line.split(b";")[0], 16)
                    rest = self._fill(s, rest, size + 2)
                    body, rest = body + rest[:size], rest[size + 2:]
            else:
                n = int(h.get("content-length", 0))
                rest = self._fill(s, rest, n)
                body, rest = rest[:n], rest[n:]
            method, target = head.split(b"\r\n")[0].decode().split(" ")[:2]
            yield method, target, head, h, body

    @staticmethod
    def _fill(s, buf, n):
        """buf with bytes read from s until it holds n (or EOF)."""
        while len(buf) < n:
            d = s.recv(65536)
            if not d:
                break
            buf += d
        return buf

    def stop(self):
        """Stop listening and close every accepted connection. Each is shut
        down first: a close alone leaves a socket that another thread is
        blocked on (accept, recv) open, so the listener would still accept
        and a keep-alive connection still be served."""
        for s in [self.ls] + self.socks_now():
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def socks_now(self):
        with self.lock:
            return list(self.socks)


class Script:
    """What a scripted backend does per path, shared by its handler
    threads and the test: the mode the test set for a path, and how many
    requests the path got."""

    def __init__(self, default="ok"):
        self.lock = threading.Lock()
        self.counts, self.modes, self.default = {}, {}, default

    def seen(self, path):
        """Count a request for path; returns its mode."""
        with self.lock:
            self.counts[path] = self.counts.get(path, 0) + 1
            return self.modes.get(path, self.default)

    def fetches(self, path):
        with self.lock:
            return self.counts.get(path, 0)

    def set_mode(self, path, mode):
        with self.lock:
            self.modes[path] = mode


# Guards every Counting's counts, down and slow: a test that changes down
# or slow holds it too.
COUNTING_LOCK = threading.Lock()


class Counting:
    """A scripted cache that counts the (method, path) of each request and
    answers 200 with its name, the method and the path (a GET with
    max-age=60), a PURGE with purge_status; the Host of each PURGE in
    purge_hosts. A GET for a path
    in down has its connection dropped, one in slow is answered after
    slow_s seconds (change them under COUNTING_LOCK). For the tests of
    purge and replicas: testcache's evhttp cannot receive PURGE."""

    def __init__(self, name, slow_s=1.5):
        self.name = name
        self.counts = {}
        self.purge_hosts = []
        self.down = set()
        self.slow = set()
        self.slow_s = slow_s
        self.purge_status = 200     # change under COUNTING_LOCK
        self.fake = Fake(self.handler)
        self.port = self.fake.port

    def n(self, method, path):
        with COUNTING_LOCK:
            return self.counts.get((method, path), 0)

    def total(self, method="GET"):
        with COUNTING_LOCK:
            return sum(v for (m, _), v in self.counts.items() if m == method)

    def handler(self, fake, s, n):
        for method, target, head, _, _ in fake.requests(s):
            p = target.split("?")[0]
            host = re.search(rb"\r\nhost: *([^\r]*)", head, re.I)
            with COUNTING_LOCK:
                self.counts[(method, p)] = self.counts.get((method, p), 0) + 1
                if method == "PURGE":
                    self.purge_hosts.append(host.group(1).decode() if host else "")
                down, slow = p in self.down, p in self.slow
                status = self.purge_status if method == "PURGE" else 200
            if down and method == "GET":
                return
            if slow and method == "GET":
                time.sleep(self.slow_s)
            body = f"{self.name} {method} {p}\n".encode()
            cc = "Cache-Control: max-age=60\r\n" if method == "GET" else ""
            s.sendall(f"HTTP/1.1 {status} X\r\n{cc}Content-Length: {len(body)}\r\n\r\n".encode() + body)


class Syslog:
    """A syslog receiver on loopback: UDP on 127.0.0.1 (path None; its
    address is `syslog:127.0.0.1:PORT`) or a local datagram socket at path
    (`syslog:PATH`). With read=False nothing is read: the socket's queue
    fills as a stalled syslog daemon's would."""

    def __init__(self, path=None, read=True):
        self.path = path
        self.got = []
        self.lock = threading.Lock()
        self.s = self._bind()
        self.spec = f"syslog:{path}" if path else f"syslog:127.0.0.1:{self.s.getsockname()[1]}"
        if read:
            threading.Thread(target=self._run, args=(self.s,), daemon=True).start()

    def _bind(self):
        if self.path is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(self.path)
        return s

    def _run(self, s):
        while True:
            try:
                d = s.recv(65536)
            except OSError:
                return
            with self.lock:
                self.got.append(d.decode("utf-8", "replace"))

    def messages(self):
        with self.lock:
            return list(self.got)

    def drain(self):
        """What the socket holds, read without waiting (read=False)."""
        self.s.setblocking(False)
        out = []
        while True:
            try:
                out.append(self.s.recv(65536).decode("utf-8", "replace"))
            except BlockingIOError:
                return out

    def restart(self):
        """A daemon's restart: its socket closed and bound again at the
        same path (what an old connection to it no longer reaches)."""
        self.s.close()
        os.unlink(self.path)
        self.s = self._bind()
        threading.Thread(target=self._run, args=(self.s,), daemon=True).start()

    def stop(self):
        self.s.close()
