#!/usr/bin/env python3
"""test_cache_rules.py -- the cache rules of issue 25 as a client and a
backend see them: a single byte range answered 206 from a stored object
(416 past its end, If-Range, several ranges and ranges of objects not
stored forwarded), heuristic freshness from Last-Modified within
[cache] heuristic_max, no-cache responses stored and revalidated before
each use, CDN-Cache-Control, Surrogate-Control and [cache] target_field
ruling this cache (and [cache] strip_targeted keeping them from clients),
Age by its first member and an invalid one ignored (RFC 9111 5.1), a
CDN-Cache-Control that is no Dictionary ignored, fresh responses of any final
status stored (must-understand refusing an unknown one), Location and
Content-Location invalidated after a POST, and a 304 updating the stored
head but its ETag.

The backend is scripted (harness.Fake): each path says its answer, and
every request head it receives is kept, so a test can tell a hit from a
fetch and read what the proxy sent.
usage: test_cache_rules.py RINGPROXY TESTCACHE"""

import email.utils
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

BODY = b"0123456789ABCDEF"
LM = "Tue, 14 Nov 2023 22:13:20 GMT"
seen = {}                       # path -> [request head, ...]
lock = threading.Lock()


def fetches(path):
    with lock:
        return len(seen.get(path, []))


def last_head(path):
    with lock:
        return seen[path][-1] if seen.get(path) else b""


def httpdate(t_):
    return email.utils.formatdate(t_, usegmt=True)


def script(method, path, head):
    """(status, [(name, value)], body) for a request."""
    cc = [("Cache-Control", "max-age=60")]
    inm = re.search(rb"\r\nif-none-match: *([^\r]*)", head, re.I)
    if path.startswith("/range"):
        return 200, cc + [("ETag", '"r1"'), ("Last-Modified", LM)], BODY
    if path.startswith("/heur"):
        # Last-Modified 10 days ago: 10% is a day
        return 200, [("Date", httpdate(time.time())), ("Last-Modified", httpdate(time.time() - 864000))], BODY
    if path.startswith("/nocache"):
        if inm and inm.group(1) == b'"n1"':
            return 304, [("ETag", '"n1"'), ("Cache-Control", "no-cache")], b""
        return 200, [("Cache-Control", "no-cache"), ("ETag", '"n1"')], BODY
    if path.startswith("/cdn-over-nostore"):
        return 200, [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")], BODY
    if path.startswith("/cdn-nostore"):
        return 200, cc + [("CDN-Cache-Control", "no-store")], BODY
    if path.startswith("/target-over-cdn"):
        return 200, [("CDN-Cache-Control", "no-store"), ("Ringproxy-Cache-Control", "max-age=60")], BODY
    if path.startswith("/target-private"):
        return 200, cc + [("Ringproxy-Cache-Control", "private")], BODY
    if path.startswith("/surrogate"):
        return 200, [("Cache-Control", "no-store"), ("Surrogate-Control", "max-age=60;ringproxy")], BODY
    if path.startswith("/age-old-0"):
        return 200, [("Cache-Control", "max-age=3600"), ("Age", "7200, 0")], BODY
    if path.startswith("/age-0-0"):
        return 200, [("Cache-Control", "max-age=3600"), ("Age", "0, 0")], BODY
    if path.startswith("/age-word"):
        return 200, [("Cache-Control", "max-age=3600"), ("Age", "abc")], BODY
    if path.startswith("/cdn-not-sf"):
        return 200, [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60.5")], BODY
    if path.startswith("/s302"):
        return 302, cc + [("Location", "/elsewhere")], b"moved\n"
    if path.startswith("/s500"):
        return 500, cc, b"broken\n"
    if path.startswith("/s599mu"):
        return 599, [("Cache-Control", "max-age=60, must-understand")], b"odd\n"
    if path.startswith("/form"):
        if method == "POST" and "cl" in path:
            return 201, [("Content-Location", "/cl-target.jpg")], b"made\n"
        if method == "POST" and "other" in path:
            return 201, [("Location", "http://other.example/loc-target.jpg")], b"made\n"
        return 201, [("Location", "/loc-target.jpg")], b"made\n"
    if path.startswith("/upd"):
        if inm and inm.group(1) == b'"u1"':
            return 304, [("ETag", '"u2"'), ("Cache-Control", "max-age=60"), ("X-Updated", "yes")], b""
        return 200, [("Cache-Control", "max-age=1"), ("ETag", '"u1"'), ("X-Updated", "no")], BODY
    return 200, cc, BODY


def handler(fake, s, n):
    for method, target, head, _, _ in fake.requests(s):
        path = target.split("?")[0]
        with lock:
            seen.setdefault(path, []).append(head)
        status, hdrs, body = script(method, path, head)
        out = f"HTTP/1.1 {status} X\r\n".encode()
        out += b"".join(f"{k}: {v}\r\n".encode() for k, v in hdrs)
        if status == 304:
            out += b"\r\n"
        else:
            out += f"Content-Length: {len(body)}\r\n\r\n".encode() + (b"" if method == "HEAD" else body)
        s.sendall(out)


def conf(fake, cache):
    return harness.conf_text([("fake", fake.port)], proxy={"retries": 0},
                             health={"passive": "off"}, cache=cache)


def cs(h):
    return h.get("cache-status", "")


def twice(P, path, **kw):
    """Two GETs of path: the second's (status, headers, body)."""
    harness.get(P, path, **kw)
    return harness.get(P, path, **kw)


def ranges(P):
    harness.get(P, "/range.bin")
    cases = [("bytes=2-5", b"2345", "bytes 2-5/16"), ("bytes=10-", b"ABCDEF", "bytes 10-15/16"),
             ("bytes=-3", b"DEF", "bytes 13-15/16"), ("bytes=0-99", BODY, "bytes 0-15/16"),
             ("bytes=15-15", b"F", "bytes 15-15/16")]
    for rng, want, cr in cases:
        st, h, b = harness.get(P, "/range.bin", headers={"Range": rng})
        t.check(st == 206 and b == want and h.get("content-range") == cr and
                h.get("content-length") == str(len(want)) and h.get("etag") == '"r1"' and
                cs(h).startswith("ringproxy; hit") and fetches("/range.bin") == 1,
                f"Range: {rng} of a stored object: 206 from memory, Content-Range: {cr}", (st, h, b))
    for rng in ("bytes=16-", "bytes=-0"):
        st, h, b = harness.get(P, "/range.bin", headers={"Range": rng})
        t.check(st == 416 and b == b"" and h.get("content-range") == "bytes */16" and
                fetches("/range.bin") == 1,
                f"Range: {rng} past the end: 416, Content-Range: bytes */16, no backend fetch", (st, h))
    st, h, b = harness.get(P, "/range.bin", headers={"Range": "bytes=0-1"})
    st2, h2, b2 = harness.get(P, "/range.bin")
    t.check(st2 == 200 and b2 == BODY and h2.get("content-length") == "16",
            "after a range, the whole object is still whole", h2)
    for ir, want in (('"r1"', 206), ('"r2"', 200), ('W/"r1"', 200), (LM, 206),
                     ("Wed, 15 Nov 2023 22:13:20 GMT", 200)):
        st, h, b = harness.get(P, "/range.bin", headers={"Range": "bytes=2-3", "If-Range": ir})
        t.check(st == want and b == (b"23" if want == 206 else BODY) and fetches("/range.bin") == 1,
                f"If-Range: {ir}: {want} from memory", (st, h))
    st, h, b = harness.get(P, "/range.bin", headers={"Range": "bytes=0-1,4-5"})
    t.check(fetches("/range.bin") == 2 and b"range: bytes=0-1,4-5" in last_head("/range.bin").lower(),
            "several ranges are forwarded with their Range", (st, h))
    st, h, b = harness.get(P, "/range.bin", headers={"Range": "bytes=x-1"})
    t.check(fetches("/range.bin") == 3, "a malformed Range is forwarded", (st, h))
    st, h, b = harness.get(P, "/range-new.bin", headers={"Range": "bytes=0-1"})
    st2, h2, b2 = harness.get(P, "/range-new.bin")
    t.check(fetches("/range-new.bin") == 2 and b"range: bytes=0-1" in seen["/range-new.bin"][0].lower()
            and cs(h2) == "ringproxy; fwd=miss; stored",
            "a Range of an object not stored is forwarded, and its answer not stored", (h, h2))


def heuristics(P, proxy, fake, base):
    st, h, b = twice(P, "/heur.jpg")
    m = re.search(r"ttl=(\d+)", cs(h))
    t.check(fetches("/heur.jpg") == 1 and m and 86390 <= int(m.group(1)) <= 86400,
            "no Cache-Control, Last-Modified 10 days ago: fresh for 10% of that, a day (heuristic_max 24h)",
            h)
    harness.write("rules.ini", conf(fake, dict(base, heuristic_max="1h")))
    r = proxy.reload()
    st, h, b = twice(P, "/heur-1h.jpg")
    m = re.search(r"ttl=(\d+)", cs(h))
    t.check(r and fetches("/heur-1h.jpg") == 1 and m and 3590 <= int(m.group(1)) <= 3600,
            "heuristic_max = 1h caps it at an hour", (r, h))
    harness.write("rules.ini", conf(fake, dict(base, heuristic_max="0")))
    r = proxy.reload()
    st, h, b = twice(P, "/heur-off.jpg")
    t.check(r and fetches("/heur-off.jpg") == 2 and cs(h) == "ringproxy; fwd=miss",
            "heuristic_max = 0: no heuristic freshness, not stored", (r, h))
    harness.write("rules.ini", conf(fake, base))
    proxy.reload()


def no_cache(P):
    harness.get(P, "/nocache.jpg")
    for i in (2, 3):
        st, h, b = harness.get(P, "/nocache.jpg")
        inm = re.search(rb"\r\nif-none-match: *([^\r]*)", last_head("/nocache.jpg"), re.I)
        t.check(st == 200 and b == BODY and fetches("/nocache.jpg") == i and inm and inm.group(1) == b'"n1"'
                and "fwd-status=304" in cs(h),
                f"no-cache: stored, and request {i} revalidated (If-None-Match, 304) before it is used", h)


def targeted(P, proxy, fake, base):
    for path, stored, what in [
            ("/cdn-over-nostore.jpg", True, "CDN-Cache-Control: max-age=60 over Cache-Control: no-store"),
            ("/cdn-nostore.jpg", False, "CDN-Cache-Control: no-store over Cache-Control: max-age=60"),
            ("/target-over-cdn.jpg", True, "Ringproxy-Cache-Control: max-age=60 over CDN-Cache-Control: no-store"),
            ("/target-private.jpg", False, "Ringproxy-Cache-Control: private over Cache-Control: max-age=60"),
            ("/surrogate.jpg", True, "Surrogate-Control: max-age=60;ringproxy over Cache-Control: no-store")]:
        st, h, b = twice(P, path)
        t.check(fetches(path) == (1 if stored else 2),
                f"{what}: {'stored' if stored else 'not stored'}", (fetches(path), h))
    t.check(b"surrogate-capability: ringproxy=\"surrogate/1.0\"" in seen["/surrogate.jpg"][0].lower(),
            "a fill advertises Surrogate-Capability: ringproxy", seen["/surrogate.jpg"][0])
    st, h, b = harness.get(P, "/cdn-over-nostore.jpg")
    t.check("cdn-cache-control" in h, "strip_targeted off (default): CDN-Cache-Control reaches the client", h)
    harness.write("rules.ini", conf(fake, dict(base, strip_targeted="on", target_field="Edge-Control")))
    r = proxy.reload()
    st1, h1, b1 = harness.get(P, "/target-over-cdn-2.jpg")
    st2, h2, b2 = harness.get(P, "/target-over-cdn-2.jpg")
    t.check(r and fetches("/target-over-cdn-2.jpg") == 2,
            "target_field = Edge-Control: Ringproxy-Cache-Control is no longer read (CDN-Cache-Control: no-store "
            "rules)", (r, h2))
    st1, h1, b1 = harness.get(P, "/cdn-over-nostore-2.jpg")
    st2, h2, b2 = harness.get(P, "/cdn-over-nostore-2.jpg")
    t.check(fetches("/cdn-over-nostore-2.jpg") == 1 and "cdn-cache-control" not in h1 and
            "cdn-cache-control" not in h2 and h2.get("cache-control") == "no-store",
            "strip_targeted = on: CDN-Cache-Control still rules, but reaches no client (miss or hit); "
            "Cache-Control does", (h1, h2))
    harness.write("rules.ini", conf(fake, base))
    proxy.reload()


def ages_and_statuses(P):
    # RFC 9111 5.1: a list counts by its first member; an invalid Age is ignored
    for path, age, n, what in (("/age-old-0.jpg", "7200, 0", 2, "the first member, 7200: stale, not stored"),
                               ("/age-0-0.jpg", "0, 0", 1, "the first member, 0: fresh, the second a hit"),
                               ("/age-word.jpg", "abc", 1, "invalid, ignored: fresh, the second a hit")):
        st, h, b = twice(P, path)
        t.check(fetches(path) == n, f"Age: {age}: {what}", h)
    # RFC 9213 2.1: a CDN-Cache-Control that is no Dictionary is ignored
    st, h, b = twice(P, "/cdn-not-sf.jpg")
    t.check(fetches("/cdn-not-sf.jpg") == 2, "CDN-Cache-Control: max-age=60.5 (a Decimal, not an Integer) is "
            "ignored whole: Cache-Control's no-store rules, nothing stored", h)
    for path, status in (("/s302", 302), ("/s500", 500)):
        st, h, b = twice(P, path)
        t.check(st == status and fetches(path) == 1 and cs(h).startswith("ringproxy; hit"),
                f"a fresh {status} (max-age=60) is stored and answered from memory", (st, h))
    st, h, b = twice(P, "/s599mu")
    t.check(st == 599 and fetches("/s599mu") == 2, "599 with must-understand: not stored", (st, h))


def invalidation(P):
    for form, target, what in (("/form", "/loc-target.jpg", "Location"),
                               ("/form-cl", "/cl-target.jpg", "Content-Location")):
        twice(P, target)
        n = fetches(target)
        harness.get(P, form, method="POST", body=b"x=1")
        st, h, b = harness.get(P, target)
        t.check(n == 1 and fetches(target) == 2,
                f"a POST answered with {what}: {target} is invalidated too", (n, fetches(target), h))
    harness.get(P, "/loc-target.jpg")
    n = fetches("/loc-target.jpg")
    harness.get(P, "/form-other", method="POST", body=b"x=1")
    harness.get(P, "/loc-target.jpg")
    t.check(fetches("/loc-target.jpg") == n, "a Location on another host invalidates nothing here")


def update304(P):
    harness.get(P, "/upd.jpg")
    time.sleep(2.2)
    st, h, b = harness.get(P, "/upd.jpg")
    t.check(st == 200 and b == BODY and fetches("/upd.jpg") == 2 and h.get("x-updated") == "yes" and
            h.get("etag") == '"u1"' and h.get("cache-control") == "max-age=60",
            "a 304 updates the stored head (X-Updated, Cache-Control) but not its ETag", h)


def main():
    fake = harness.Fake(handler)
    base = {"size": "8m", "max_object": "64k", "min_uses": 1}
    proxy = harness.Proxy(RP, path=harness.write("rules.ini", conf(fake, base)), tag="rules")
    P = proxy.port
    ranges(P)
    heuristics(P, proxy, fake, base)
    no_cache(P)
    targeted(P, proxy, fake, base)
    ages_and_statuses(P)
    invalidation(P)
    update304(P)
    proxy.stop()
    fake.stop()
    t.done()


if __name__ == "__main__":
    main()
