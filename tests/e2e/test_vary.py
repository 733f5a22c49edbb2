#!/usr/bin/env python3
"""test_vary.py -- responses that Vary on request headers (RFC 9111 4.1)
through the cache, and [cache] image_formats against an image origin that
negotiates AVIF, WebP and JPEG as image services do (the first of AVIF,
WebP a request's Accept names with q > 0, else JPEG; Vary: Accept).

Real browsers' image Accept strings (MDN, "List of default Accept values",
Values for an image; Safari 17.6's from its own requests): each gets the
format it gets from the origin without the proxy, the origin sees one
fetch per format (three) whatever the strings, repeats are hits, and the
later fetches carry the variant's own Accept. Vary: X-Device keeps the
devices apart (whitespace normalised, case kept), a non-image Vary: Accept
is keyed by the normalised Accept, Vary: * is never served from the
cache, a purge removes every variant, and concurrent misses make one
fetch per variant; a stale variant is refreshed in the background with
its own header values.
usage: test_vary.py RINGPROXY TESTCACHE"""

import http.client
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
HOST = "img.test"

BROWSERS = [
    ("Chrome", "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"),
    ("Firefox", "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"),
    ("Safari 17", "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,"
                  "video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"),
    ("Firefox 92", "image/avif,image/webp,*/*"),
    ("Firefox 65-91", "image/webp,*/*"),
    ("Safari 14-15", "image/webp,image/png,image/svg+xml,image/*;q=0.8,video/*;q=0.8,*/*;q=0.5"),
    ("Firefox 47-63", "*/*"),
    ("Safari 13", "image/png,image/svg+xml,image/*;q=0.8,video/*;q=0.8,*/*;q=0.5"),
    ("no Accept", None),
]

lock = threading.Lock()
fetched = {}        # path -> [Accept the origin got, ...] (GETs)


def fetches(path):
    with lock:
        return list(fetched.get(path, []))


def negotiate(accept):
    """The origin's choice: AVIF, else WebP, else JPEG; a format counts
    when the Accept names it with a q above 0 (wildcards do not)."""
    named = {}
    for el in (accept or "").split(","):
        parts = [x.strip() for x in el.split(";")]
        q = 1.0
        for p in parts[1:]:
            if p.lower().startswith("q="):
                try:
                    q = float(p[2:])
                except ValueError:
                    q = 0.0
        if parts[0]:
            named[parts[0].lower()] = max(q, named.get(parts[0].lower(), 0.0))
    for fmt in ("avif", "webp"):
        if named.get("image/" + fmt, 0.0) > 0:
            return fmt
    return "jpeg"


def handler(fake, s, n):
    for method, target, _, hdr, _ in fake.requests(s):
        p = target.split("?")[0]
        accept = hdr.get("accept")
        if method == "PURGE":
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            continue
        with lock:
            fetched.setdefault(p, []).append(accept)
        cc = "Cache-Control: max-age=60\r\n"
        if p.startswith("/swr"):
            cc = "Cache-Control: max-age=1, stale-while-revalidate=60\r\n"
        if p.startswith("/slow"):
            time.sleep(0.5)
        if p.startswith("/img") or p.startswith("/slow") or p.startswith("/swrimg"):
            fmt = negotiate(accept)
            body, extra = f"{fmt} {p}".encode(), f"Content-Type: image/{fmt}\r\nVary: Accept\r\n"
        elif p.startswith("/jxl") or p.startswith("/substr"):
            # /jxl: JPEG XL first to a client that names it; /substr: an
            # origin that looks for the type's name in Accept, q aside
            # (as thumbor and imgproxy do)
            a = (accept or "").lower()
            if p.startswith("/jxl"):
                fmt = "jxl" if "image/jxl" in a else negotiate(accept)
            else:
                fmt = "avif" if "image/avif" in a else "webp" if "image/webp" in a else "jpeg"
            body, extra = f"{fmt} {p}".encode(), f"Content-Type: image/{fmt}\r\nVary: Accept\r\n"
        elif p.startswith("/page"):
            body, extra = f"page for {accept}".encode(), "Content-Type: text/html\r\nVary: Accept\r\n"
        elif p.startswith("/dev") or p.startswith("/swrdev"):
            dev = hdr.get("x-device", "(none)")
            body, extra = f"device {dev} #{len(fetches(p))}".encode(), "Vary: X-Device\r\n"
        elif p.startswith("/star"):
            body, extra = b"star", "Vary: *\r\n"
        else:
            body, extra = b"plain", ""
        s.sendall(f"HTTP/1.1 200 OK\r\n{cc}{extra}Content-Length: {len(body)}\r\n\r\n".encode() + body)


def get(port, path, accept=None, headers=None):
    h = {"Host": HOST}
    if accept is not None:
        h["Accept"] = accept
    h.update(headers or {})
    return harness.get(port, path, headers=h)


def cs(h):
    return h.get("cache-status", "")


def purge(admin, url):
    c = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
    try:
        c.request("POST", "/purge?url=" + urllib.parse.quote(url, safe=""))
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def burst(port, path, accepts):
    """One GET per Accept in accepts, all at once: [(status, body)]."""
    out = [None] * len(accepts)
    go = threading.Event()

    def one(i):
        go.wait()
        try:
            st, h, b = get(port, path, accepts[i])
            out[i] = (st, b)
        except Exception as e:  # a failed request is a result
            out[i] = (0, repr(e).encode())

    th = [threading.Thread(target=one, args=(i,)) for i in range(len(accepts))]
    for x in th:
        x.start()
    go.set()
    for x in th:
        x.join(30)
    return out


def main():
    fake = harness.Fake(handler)
    proxy = harness.Proxy(RP, harness.conf_text(
        [("origin", fake.port)], proxy={"workers": 2, "retries": 0, "admin_listen": "127.0.0.1:0"},
        health={"passive": "off"},
        cache={"size": "8m", "min_uses": 1, "lock_timeout": "10s", "image_formats": "avif, webp"}), tag="vary")
    P = proxy.port
    A = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    # ---- image formats: what the origin gives each browser without us ----
    direct = {}
    for name, acc in BROWSERS:
        st, h, b = get(fake.port, "/img/direct.jpg", acc)
        direct[name] = h.get("content-type")
    t.check(direct["Chrome"] == direct["Firefox"] == direct["Safari 17"] == "image/avif"
            and direct["Firefox 65-91"] == "image/webp" and direct["Firefox 47-63"] == "image/jpeg",
            "the origin alone: AVIF to Chrome, Firefox and Safari 17, WebP to older ones, JPEG to the rest",
            direct)

    got = {}
    for name, acc in BROWSERS:
        st, h, b = get(P, "/img/1.jpg", acc)
        got[name] = (st, h.get("content-type"), b, cs(h))
    t.check(all(got[n][0] == 200 and got[n][1] == direct[n]
                and got[n][2] == f"{direct[n][6:]} /img/1.jpg".encode() for n, _ in BROWSERS),
            "through the proxy each browser gets the format it gets without it",
            {n: got[n][1] for n, _ in BROWSERS})
    seen = fetches("/img/1.jpg")
    t.check(len(seen) == 3, "the origin saw 3 fetches for 9 Accept strings (one per format)", seen)
    t.check(seen[1:] == ["image/webp, */*;q=0.8", "*/*"],
            "the fetches of later variants send the variant's own Accept, not the browser's", seen)
    again = {}
    for name, acc in BROWSERS:
        st, h, b = get(P, "/img/1.jpg", acc)
        again[name] = (st, h.get("content-type"), cs(h))
    t.check(all(again[n][0] == 200 and again[n][1] == direct[n] and again[n][2].startswith("ringproxy; hit")
                for n, _ in BROWSERS) and len(fetches("/img/1.jpg")) == 3,
            "repeats are hits, each of its own format, and no fetch more", again)

    # ---- coalescing per variant ---------------------------------------------
    res = burst(P, "/slow/1.jpg", [BROWSERS[0][1]] * 12)
    t.check(all(r == (200, b"avif /slow/1.jpg") for r in res) and len(fetches("/slow/1.jpg")) == 1,
            "12 concurrent cold Chrome requests: one fetch, every one served AVIF",
            (fetches("/slow/1.jpg"), res[:2]))
    accs = [BROWSERS[4][1], BROWSERS[5][1]] * 6 + [BROWSERS[6][1], BROWSERS[7][1]] * 6
    res = burst(P, "/slow/1.jpg", accs)
    want = [b"webp /slow/1.jpg"] * 12 + [b"jpeg /slow/1.jpg"] * 12
    t.check(all(r == (200, w) for r, w in zip(res, want)) and len(fetches("/slow/1.jpg")) == 3,
            "then 24 at once of the two other variants: one fetch per variant, each its format",
            (fetches("/slow/1.jpg"), [r[1][:4] for r in res]))

    # ---- a non-image Vary: Accept -------------------------------------------
    get(P, "/page/1", "text/html, application/json;q=0.9")
    st, h, b = get(P, "/page/1", "Application/JSON; q=0.9,text/html")
    t.check(cs(h).startswith("ringproxy; hit") and len(fetches("/page/1")) == 1,
            "Vary: Accept of a page: the same Accept reordered, recased and respaced is a hit", h)
    st, h, b = get(P, "/page/1", "text/html")
    t.check(b == b"page for text/html" and len(fetches("/page/1")) == 2,
            "another Accept is another variant", (b, fetches("/page/1")))

    # ---- Vary on another header ---------------------------------------------
    get(P, "/dev/1", headers={"X-Device": "mobile"})
    st, h, b = get(P, "/dev/1", headers={"X-Device": " mobile "})
    t.check(b == b"device mobile #1" and cs(h).startswith("ringproxy; hit") and len(fetches("/dev/1")) == 1,
            "Vary: X-Device: the same device (whitespace aside) is a hit", (b, h))
    st, h, b = get(P, "/dev/1", headers={"X-Device": "desktop"})
    t.check(b == b"device desktop #2" and len(fetches("/dev/1")) == 2,
            "another device is not served the mobile variant", b)
    st, h, b = get(P, "/dev/1")
    t.check(b == b"device (none) #3" and len(fetches("/dev/1")) == 3,
            "a request without X-Device matches neither", b)
    st, h, b = get(P, "/dev/1", headers={"X-Device": "Mobile"})
    t.check(b == b"device Mobile #4" and len(fetches("/dev/1")) == 4,
            "an unknown field keeps its case: Mobile is not mobile", b)
    res = [get(P, "/dev/1", headers=hd)[2] for hd in
           ({"X-Device": "mobile"}, {"X-Device": "desktop"}, {}, {"X-Device": "Mobile"})]
    t.check(res == [b"device mobile #1", b"device desktop #2", b"device (none) #3", b"device Mobile #4"]
            and len(fetches("/dev/1")) == 4, "each of the four variants is then a hit", res)

    # ---- Vary: * -------------------------------------------------------------
    for _ in range(3):
        st, h, b = get(P, "/star/1")
    t.check(len(fetches("/star/1")) == 3 and not cs(h).startswith("ringproxy; hit"),
            "Vary: * is never served from the cache", (fetches("/star/1"), h))

    # ---- purge ---------------------------------------------------------------
    st, body = purge(A, f"http://{HOST}/img/1.jpg")
    t.check(st == 200, "POST /purge?url= of the image", (st, body))
    for name, acc in BROWSERS:
        st, h, b = get(P, "/img/1.jpg", acc)
        got[name] = (h.get("content-type"), cs(h))
    t.check(len(fetches("/img/1.jpg")) == 6 and all(got[n][0] == direct[n] for n, _ in BROWSERS),
            "a purge removes every variant: each format fetched once again", (fetches("/img/1.jpg"), got))
    st, body = purge(A, f"http://{HOST}/dev/1")
    st, h, b = get(P, "/dev/1", headers={"X-Device": "desktop"})
    t.check(b == b"device desktop #5" and len(fetches("/dev/1")) == 5, "and so for Vary: X-Device", body)

    # ---- a client cannot choose what a variant holds for everyone --------
    # the key is ours (the first listed format with q > 0), the format the
    # origin's: a response whose Content-Type is not the key's format (for
    # the key of none: one of the listed formats) is answered, not stored
    st, h, b = get(P, "/jxl/1.jpg", "image/jxl, image/avif;q=0.1")
    t.check(b == b"jxl /jxl/1.jpg" and "stored" not in cs(h),
            "a JPEG XL fetched under the AVIF variant's key goes to its client, not into the cache", (b, cs(h)))
    st, h, b = get(P, "/jxl/1.jpg", BROWSERS[0][1])
    t.check(b == b"avif /jxl/1.jpg" and h.get("content-type") == "image/avif",
            "Chrome then gets AVIF, not the JPEG XL", (b, h))
    st, h, b = get(P, "/jxl/1.jpg", BROWSERS[0][1])
    t.check(b == b"avif /jxl/1.jpg" and cs(h).startswith("ringproxy; hit"),
            "... and the AVIF its own fill stored is a hit", (b, cs(h)))
    st, h, b = get(P, "/substr/1.jpg", "image/avif;q=0, image/png")
    t.check(b == b"avif /substr/1.jpg" and "stored" not in cs(h),
            "an origin that tests Accept by substring sends AVIF to image/avif;q=0: not stored "
            "under the key of no format", (b, cs(h)))
    st, h, b = get(P, "/substr/1.jpg", BROWSERS[7][1])
    t.check(b == b"jpeg /substr/1.jpg" and h.get("content-type") == "image/jpeg",
            "Safari 13 (no listed format) then gets its JPEG, not that AVIF", (b, h))

    # ---- stale-while-revalidate: the background refresh of a variant -------
    get(P, "/swrdev/1", headers={"X-Device": "mobile"})
    get(P, "/swrdev/1", headers={"X-Device": "tv"})
    get(P, "/swrimg/1.jpg", BROWSERS[4][1])
    time.sleep(2.2)
    st, h, b = get(P, "/swrdev/1", headers={"X-Device": "mobile"})
    st2, h2, b2 = get(P, "/swrimg/1.jpg", BROWSERS[5][1])
    t.check(b == b"device mobile #1" and "fwd=stale" in cs(h) and b2.startswith(b"webp") and "fwd=stale" in cs(h2),
            "stale within stale-while-revalidate: each variant served stale", (b, h, b2, h2))
    harness.wait_until(lambda: len(fetches("/swrdev/1")) == 3 and len(fetches("/swrimg/1.jpg")) == 2, 10)
    t.check(len(fetches("/swrdev/1")) == 3 and len(fetches("/swrimg/1.jpg")) == 2
            and fetches("/swrimg/1.jpg")[1] == "image/webp, */*;q=0.8",
            "the background refresh asks for the variant: its X-Device, the image variant's Accept",
            (fetches("/swrdev/1"), fetches("/swrimg/1.jpg")))
    harness.wait_until(lambda: get(P, "/swrdev/1", headers={"X-Device": "mobile"})[2] == b"device mobile #3", 5)
    res = [get(P, "/swrdev/1", headers={"X-Device": d}) for d in ("mobile", "tv")]
    t.check(res[0][2] == b"device mobile #3" and cs(res[0][1]).startswith("ringproxy; hit")
            and res[1][2] == b"device tv #2",
            "the refreshed variant replaces its own stale copy only", [(r[2], cs(r[1])) for r in res])
    proxy.stop()
    fake.stop()


harness.run_main(t, main)
