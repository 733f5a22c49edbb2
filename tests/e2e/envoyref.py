"""envoyref.py -- an independent Python model of Envoy's ring_hash load
balancer (source/extensions/load_balancing_policies/ring_hash/
ring_hash_lb.cc, Ring::Ring and chooseHost) with its default hash,
xxHash64 (seed 0), written from the algorithms' descriptions, used by the
end-to-end tests to predict where ringproxy's scheme = envoy must send a
request: weights normalised to w / sum; scale = min(ceil(min_w x
minimum_ring_size) / min_w, maximum_ring_size); in host order each adds
scale x its weight to a running target and takes the points
xxHash64("identity_i"), i = 0, 1, ..., while a running count is below it;
a key is xxHash64 of the :path; its owner the first point >= it,
wrapping."""

import bisect
import math

M64 = (1 << 64) - 1
P1 = 0x9E3779B185EBCA87
P2 = 0xC2B2AE3D27D4EB4F
P3 = 0x165667B19E3779F9
P4 = 0x85EBCA77C2B2AE63
P5 = 0x27D4EB2F165667C5


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    acc = (acc + lane * P2) & M64
    return (_rotl(acc, 31) * P1) & M64


def _merge(h, v):
    h ^= _round(0, v)
    return (h * P1 + P4) & M64


def xxh64(data: bytes, seed: int = 0) -> int:
    """xxHash64 (Yann Collet's specification, XXH64)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], int.from_bytes(data[i + 8 * k:i + 8 * k + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for k in range(4):
            h = _merge(h, v[k])
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * P1) & M64
        h = (_rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (_rotl(h, 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


class Ring:
    def __init__(self, hosts, min_ring_size=1024, max_ring_size=8388608):
        """hosts: [(identity, weight)] in config order, weights whole."""
        total = sum(w for _, w in hosts)
        live = [(ident, w / total) for ident, w in hosts if w > 0]
        min_w = min(w for _, w in live)
        scale = min(math.ceil(min_w * min_ring_size) / min_w, max_ring_size)
        pts, current, target = [], 0.0, 0.0
        for ident, w in live:
            target += scale * w
            i = 0
            while current < target:
                pts.append((xxh64(f"{ident}_{i}".encode()), ident))
                i += 1
                current += 1.0
        pts.sort(key=lambda p: p[0])
        self.points = pts
        self.pos = [p for p, _ in pts]

    def lookup(self, key: bytes) -> str:
        i = bisect.bisect_left(self.pos, xxh64(key))
        return self.points[i % len(self.pos)][1]
