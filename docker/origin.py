#!/usr/bin/env python3
"""origin.py -- the demo's image origin (docker/compose.yaml): generates a
PNG thumbnail for any /thumbs/ID_WxH.png (a colour and stripes from ID, W x
H pixels, at most 1024 x 1024), cacheable for a day, and counts what it
served so the demo shows how little reaches it behind the caches.
  GET /thumbs/42_200x200.png   the thumbnail (other paths: 200 x 200)
  GET /stats                   {"fetches": N} (not counted)
  GET /health                  200 ok
Standard library only.
usage: origin.py [--listen HOST:PORT]   (default 0.0.0.0:8080)"""

import hashlib
import http.server
import json
import re
import struct
import sys
import threading
import zlib

FETCHES = 0
LOCK = threading.Lock()


def png(width, height, seed):
    """A width x height RGB PNG: a colour from seed, diagonal stripes."""
    h = hashlib.md5(seed.encode()).digest()
    base, stripe = (h[0], h[1], h[2]), (255 - h[0], 255 - h[1], 255 - h[2])
    rows = bytearray()
    for y in range(height):
        rows.append(0)          # filter: none
        for x in range(width):
            rows.extend(stripe if (x + y) // 16 % 2 else base)

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, ctype, body, cache):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        global FETCHES
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self.reply(200, "text/plain", b"ok\n", "no-store")
        if path == "/stats":
            return self.reply(200, "application/json", json.dumps({"fetches": FETCHES}).encode() + b"\n",
                              "no-store")
        m = re.search(r"_(\d{1,4})x(\d{1,4})\.png$", path)
        w, h = (int(m.group(1)), int(m.group(2))) if m else (200, 200)
        if not (1 <= w <= 1024 and 1 <= h <= 1024):
            return self.reply(400, "text/plain", b"thumbnails are 1x1 to 1024x1024\n", "no-store")
        with LOCK:
            FETCHES += 1
        self.reply(200, "image/png", png(w, h, path), "public, max-age=86400")

    do_HEAD = do_GET

    def log_message(self, fmt, *args):
        pass                    # quiet: the caches log the traffic


def main():
    listen = "0.0.0.0:8080"
    if len(sys.argv) == 3 and sys.argv[1] == "--listen":
        listen = sys.argv[2]
    elif len(sys.argv) != 1:
        sys.exit(__doc__.splitlines()[-1])
    host, port = listen.rsplit(":", 1)
    srv = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    print(f"origin: serving thumbnails on {host}:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
