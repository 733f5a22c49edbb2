"""fakes.py -- scripted fake backends for what testcache cannot do
(broken framing, stale keep-alive connections, recording what arrives).
Standard library only."""

import socket
import threading


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
                    while b"\r\n" not in rest:
                        d = s.recv(65536)
                        if not d:
                            return
                        rest += d
                    line, _, rest = rest.partition(b"\r\n")
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
        """Stop listening and close every accepted connection."""
        self.ls.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass
