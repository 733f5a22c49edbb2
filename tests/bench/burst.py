#!/usr/bin/env python3
"""burst.py -- N clients ask for one URL at the same moment (cache.sh's
viral-cold scenario), standard library only.

usage: burst.py PORT PATH [CLIENTS [TIMEOUT_S [SIZE]]]

Opens CLIENTS (default 200) connections to 127.0.0.1:PORT and waits until
every one is established and the server has had 0.2 s to accept them all,
so that what is measured is the answer, not the accept queue.  Then it
writes the same GET PATH on every connection in one tight loop, and times
each client from its own write to the last byte of its response (parsed by
Content-Length or chunked framing, on a keep-alive connection).  One thread,
one selector; the whole run is bounded by TIMEOUT_S (default 10): a client
not answered by then counts as an error with that time (status
"timeout"; one whose connection closed early: "closed").  With SIZE, every
body is also compared with the test cache's body formula (testcache.c), so
a proxy that coalesced requests is seen to hand every waiter the same,
correct bytes.

Prints one line:
  RESULT clients=N ok=N errors=N bad_body=N p50_us=N max_us=N span_us=N
    statuses=200:N[,CODE:N...][,closed:N][,timeout:N]
ok counts the 200 responses, errors the rest; span_us is from the first
write to the last response completed.
"""
import selectors
import socket
import sys
import time


def expected_body(uri, size):
    """testcache's body: (URI + "\\n") repeated, cut to size bytes."""
    pattern = (uri + "\n").encode()
    return (pattern * (size // len(pattern) + 1))[:size]


def parse(buf):
    """(status, body) once buf holds one whole response, else None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].split(b"\r\n")
    status = int(lines[0].split()[1])
    length, chunked = None, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    rest = buf[end + 4:]
    if not chunked:
        if length is None:
            length = 0
        return (status, rest[:length]) if len(rest) >= length else None
    body, pos = b"", 0
    while True:
        eol = rest.find(b"\r\n", pos)
        if eol < 0:
            return None
        n = int(rest[pos:eol].split(b";")[0], 16)
        if n == 0:
            # no trailers expected: the last chunk is followed by CRLF
            return (status, body) if rest.find(b"\r\n", eol + 2) >= 0 else None
        if len(rest) < eol + 2 + n + 2:
            return None
        body += rest[eol + 2:eol + 2 + n]
        pos = eol + 2 + n + 2


def main():
    port, path = int(sys.argv[1]), sys.argv[2]
    clients = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
    size = int(sys.argv[5]) if len(sys.argv) > 5 else None
    deadline = time.monotonic() + timeout
    want = expected_body(path, size) if size is not None else None
    request = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "User-Agent: burst\r\n\r\n" % (path, port)).encode()

    sel = selectors.DefaultSelector()
    socks = []
    for i in range(clients):
        s = socket.socket()
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, i)
        socks.append(s)
    pending = clients
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
            err = key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                sys.exit("burst.py: connect: %s" % err)
            sel.unregister(key.fileobj)
            pending -= 1
    if pending:
        sys.exit("burst.py: %d of %d connections not established" %
                 (pending, clients))
    time.sleep(0.2)

    start, end = [0.0] * clients, [None] * clients
    bufs = [b""] * clients
    statuses, bad = {}, 0
    for i, s in enumerate(socks):
        start[i] = time.monotonic()
        s.send(request)  # a few dozen bytes: an empty socket takes them all
        sel.register(s, selectors.EVENT_READ, i)
    pending = clients
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
            i = key.data
            try:
                got = key.fileobj.recv(65536)
            except OSError:
                got = b""
            bufs[i] += got
            res = parse(bufs[i]) if got else None
            if got and res is None:
                continue
            end[i] = time.monotonic()
            sel.unregister(key.fileobj)
            pending -= 1
            status = res[0] if res is not None else "closed"
            statuses[status] = statuses.get(status, 0) + 1
            if want is not None and status == 200 and res[1] != want:
                bad += 1
    for s in socks:
        s.close()
    if pending:
        statuses["timeout"] = pending

    ok = statuses.get(200, 0)
    ends = [end[i] if end[i] is not None else deadline for i in range(clients)]
    times = sorted(ends[i] - start[i] for i in range(clients))
    print("RESULT clients=%d ok=%d errors=%d bad_body=%d p50_us=%d max_us=%d "
          "span_us=%d statuses=%s" % (
              clients, ok, clients - ok, bad, times[(clients - 1) // 2] * 1e6,
              times[-1] * 1e6, (max(ends) - start[0]) * 1e6,
              ",".join("%s:%d" % kv for kv in sorted(
                  statuses.items(), key=lambda kv: str(kv[0])))))


main()
