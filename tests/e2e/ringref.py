"""ringref.py -- an independent Python model of ringproxy's fixed ring
scheme (ARCHITECTURE.md), used by the end-to-end tests to predict what the
C implementation must do: points are MD5("NAME#i") for i < round(vnodes *
weight), read big-endian (first 8 bytes), sorted by (position, name); a key
is MD5(key); its owner is the first point at or after it, wrapping."""

import bisect
import configparser
import hashlib
import math

SPACE = 1 << 64


def h64(data: bytes) -> int:
    return int.from_bytes(hashlib.md5(data).digest()[:8], "big")


def points_for(vnodes: int, weight: float) -> int:
    # round half away from zero, as C's lround
    return int(math.floor(vnodes * weight + 0.5))


class Ring:
    def __init__(self, members, vnodes=160):
        """members: list of (name, weight) in config order."""
        self.names = [m[0] for m in members]
        self.weights = {m[0]: m[1] for m in members}
        self.npoints = {m[0]: points_for(vnodes, m[1]) for m in members}
        pts = []
        for name, _w in members:
            for i in range(self.npoints[name]):
                pts.append((h64(f"{name}#{i}".encode()), name))
        pts.sort()
        self.pos = [p for p, _ in pts]
        self.owner = [n for _, n in pts]

    def lookup(self, key: bytes) -> str:
        i = bisect.bisect_left(self.pos, h64(key))
        return self.owner[i % len(self.pos)]

    def keys_of(self, name, n, prefix="/k/"):
        """The first n keys {prefix}{i}.jpg (i = 0, 1, ...) name owns."""
        out, i = [], 0
        while len(out) < n:
            k = f"{prefix}{i}.jpg"
            if self.lookup(k.encode()) == name:
                out.append(k)
            i += 1
        return out

    def walk(self, key: bytes):
        i = bisect.bisect_left(self.pos, h64(key))
        seen = []
        for k in range(len(self.pos)):
            n = self.owner[(i + k) % len(self.pos)]
            if n not in seen:
                seen.append(n)
                yield n

    def shares(self):
        arcs = {n: 0 for n in self.names}
        for j, p in enumerate(self.pos):
            prev = self.pos[j - 1]
            arcs[self.owner[j]] += (p - prev) % SPACE if len(self.pos) > 1 else SPACE
        return {n: a / SPACE for n, a in arcs.items()}


def load_ini(path):
    """(members, vnodes) of a ringproxy config."""
    cp = configparser.ConfigParser(inline_comment_prefixes=(";",))
    cp.read(path)
    vnodes = cp.getint("ring", "vnodes", fallback=160)
    members = []
    for sec in cp.sections():
        if sec.startswith("backend "):
            members.append((sec[8:].strip(), cp.getfloat(sec, "weight", fallback=1.0)))
    return members, vnodes


def ring_of(path):
    members, vnodes = load_ini(path)
    return Ring(members, vnodes)
