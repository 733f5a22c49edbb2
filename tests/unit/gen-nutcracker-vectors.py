#!/usr/bin/env python3
"""gen-nutcracker-vectors.py -- record which server a real nutcracker
(twemproxy) sends each key to under `distribution: ketama`, with `hash: md5`
and with `hash: fnv1a_64`, as the vectors test-compat-ring checks the ketama
builder against (tests/unit/vectors-nutcracker.txt).

Five fake memcached servers on 127.0.0.1 (kernel ports) answer `get KEY`
with a value naming themselves; one nutcracker with two pools, one for each
hash, stands in front of them; each key is asked once of each pool.
Servers have mixed weights; some have a name on their line (ketama hashes
the name), the others none (ketama hashes "127.0.0.1:PORT").

Usage: python3 tests/unit/gen-nutcracker-vectors.py [OUT]   (default stdout)
       python3 tests/unit/gen-nutcracker-vectors.py --run-test TEST-BINARY
The second form (meson test compat-ring-live) records afresh into a
temporary file and runs test-compat-ring on it, so the check is made
against the nutcracker on this machine (TAP skip when there is none).
Needs the nutcracker binary (Debian package nutcracker). Standard library
only; every wait is bounded.
"""
import os
import random
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

# (label, weight, name on the server line or None)
SERVERS = [("cache-a", 1, "cache-a"), ("cache-b", 2, None), ("cache-c", 3, "cache-c"),
           ("cache-d", 1, None), ("cache-e", 5, "cache-e")]
HASHES = ["md5", "fnv1a_64"]
NKEYS = 400


class Fake(socketserver.StreamRequestHandler):
    """Enough of the memcached text protocol for nutcracker's gets."""

    def handle(self):
        label = self.server.label.encode()
        while True:
            line = self.rfile.readline(4096)
            if not line:
                return
            words = line.split()
            if words[:1] in ([b"get"], [b"gets"]):
                out = b""
                for key in words[1:]:
                    out += b"VALUE %s 0 %d\r\n%s\r\n" % (key, len(label), label)
                self.wfile.write(out + b"END\r\n")
            else:
                self.wfile.write(b"ERROR\r\n")


class FakeServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keys():
    rnd = random.Random(23)
    out = [b"VDEAAAAA", b"a", b"/", b"/thumbs/1/2.jpg?w=200"]
    while len(out) < NKEYS:
        kind = len(out) % 4
        if kind == 0:
            out.append(b"key-%d" % len(out))
        elif kind == 1:
            out.append(b"/thumbs/%d/%d_200x200.jpg" % (rnd.randrange(10**6), len(out)))
        elif kind == 2:  # printable ASCII
            out.append(bytes(rnd.randrange(0x21, 0x7f) for _ in range(rnd.randrange(1, 60))))
        else:  # bytes of 0x80 and more, which twemproxy's fnv reads signed
            out.append(bytes(rnd.choice([rnd.randrange(0x21, 0x7f), rnd.randrange(0x80, 0x100)])
                             for _ in range(rnd.randrange(1, 40))))
    return out


def ask(port, key, deadline):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"get " + key + b"\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n") and time.monotonic() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    head, _, rest = buf.partition(b"\r\n")
    if not head.startswith(b"VALUE "):
        raise SystemExit("nutcracker answered %r for key %r" % (buf[:80], key))
    return rest.split(b"\r\n", 1)[0].decode()


def wait_listening(port, deadline):
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nutcracker did not listen on %d" % port)


def record(out):
    fakes, lines = [], []
    for label, weight, name in SERVERS:
        srv = FakeServer(("127.0.0.1", 0), Fake)
        srv.label = label
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        fakes.append(srv)
        port = srv.server_address[1]
        lines.append(("127.0.0.1:%d:%d%s" % (port, weight, " " + name if name else ""),
                      name or "127.0.0.1:%d" % port, weight, label))
    pools = {h: free_port() for h in HASHES}
    tmp = tempfile.mkdtemp(prefix="nutcracker-vectors-")
    conf = os.path.join(tmp, "nutcracker.yml")
    with open(conf, "w") as f:
        for h, port in pools.items():
            f.write("pool_%s:\n  listen: 127.0.0.1:%d\n  hash: %s\n"
                    "  distribution: ketama\n  auto_eject_hosts: false\n"
                    "  timeout: 2000\n  servers:\n" % (h, port, h))
            for line, _, _, _ in lines:
                f.write("   - %s\n" % line)
    proc = subprocess.Popen(["nutcracker", "-c", conf, "-s", str(free_port()),
                             "-a", "127.0.0.1", "-o", os.path.join(tmp, "log"),
                             "-p", os.path.join(tmp, "pid")])
    try:
        deadline = time.monotonic() + 120
        for port in pools.values():
            wait_listening(port, deadline)
        version = subprocess.run(["nutcracker", "-V"], capture_output=True,
                                 text=True).stderr.split("\n")[0].replace("This is ", "")
        rows = []
        for key in keys():
            for h, port in pools.items():
                rows.append("key %s %s %s" % (h, key.hex(), ask(port, key, deadline)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for srv in fakes:
            srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    out.write("# Made by tests/unit/gen-nutcracker-vectors.py: the server that a real\n"
              "# %s (Debian 12 package) sent each key to, pools with\n"
              "# distribution: ketama and hash: md5 / fnv1a_64 over the servers below.\n"
              "# server IDENTITY WEIGHT LABEL: IDENTITY is what ketama hashes (the\n"
              "# name on the line, else 127.0.0.1:PORT); key HASH HEX-KEY LABEL.\n" % version)
    for line, ident, weight, label in lines:
        out.write("# servers: - %s\n" % line)
    for line, ident, weight, label in lines:
        out.write("server %s %d %s\n" % (ident, weight, label))
    out.write("\n".join(rows) + "\n")


def main():
    if sys.argv[1:2] == ["--run-test"] and len(sys.argv) == 3:
        if shutil.which("nutcracker") is None:
            print("1..0 # SKIP nutcracker is not installed")
            return
        fd, path = tempfile.mkstemp(prefix="vectors-nutcracker-", suffix=".txt")
        with os.fdopen(fd, "w") as out:
            record(out)
        rc = subprocess.run([sys.argv[2], path]).returncode
        os.unlink(path)
        sys.exit(rc)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as out:
            record(out)
    else:
        record(sys.stdout)


if __name__ == "__main__":
    main()
