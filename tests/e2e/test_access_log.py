#!/usr/bin/env python3
"""test_access_log.py -- [log] access: one line per request, combined or
JSON, saying who asked for what, what came back, how long it took, the
backend that answered, the cache's part and why it went there (owner,
retry, failover, cache); SIGUSR1 reopens the file after a rename; a log
that cannot be written (/dev/full) drops lines, counts them, and never
holds a request up; to syslog, one datagram a line (RFC 5424 over UDP,
RFC 3164 to a local socket), never waiting for a stalled receiver, and
back after the receiver restarts. Each line has the backend's time and its
own cache's verdict (upstream_time, tier); [log] access_hits logs the
requests ringproxy's cache answered all, none or one in N.
usage: test_access_log.py RINGPROXY TESTCACHE"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

COMBINED = re.compile(
    r'^(?P<client>\S+) - - \[(?P<time>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] '
    r'"(?P<method>\S+) (?P<target>\S+) (?P<protocol>HTTP/1\.[01])" (?P<status>\d{3}) (?P<bytes>\d+) '
    r'"(?P<referer>[^"]*)" "(?P<user_agent>[^"]*)" duration=(?P<duration>\d+\.\d{6}) '
    r'backend=(?P<backend>\S+) cache=(?P<cache>\S+) why=(?P<why>\S+) upstream_time=(?P<upstream_time>\S+) '
    r'tier=(?P<tier>\S+) request_id=(?P<request_id>[0-9a-f]{20})$')


def admin(port, path):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def lines_of(path, n, timeout=5):
    """The file's lines once it has at least n (the workers write every
    100 ms), or what it has after timeout."""
    return harness.lines_until(path, lambda got: len(got) >= n, timeout)


def serve_counting_drops(proxy, aport, prefix, n, enough):
    """n GETs of prefix + i.jpg on one connection: (how many got 200, the
    seconds they took, access_log_dropped once enough(it), or after 5 s)."""
    conn = proxy.http()
    start = time.monotonic()
    ok = sum(harness.get_on(conn, f"{prefix}{i}.jpg")[0] == 200 for i in range(n))
    took = time.monotonic() - start
    conn.close()
    got = [0]

    def counted():
        got[0] = json.loads(admin(aport, "/stats"))["access_log_dropped"]
        return enough(got[0])
    harness.wait_until(counted, 5)
    return ok, took, got[0]


def conf_with_log(caches, log, fmt="combined", **kw):
    return harness.conf_text(caches, **kw) + f"\n[log]\naccess = {log}\naccess_format = {fmt}\n"


def main():
    live = harness.Cache(TC, "live")
    log = harness.tmp_path(f"access.{time.monotonic_ns()}.log")
    path = harness.write("access.ini", conf_with_log(
        [live, ("dead", dead_port())], log, proxy={"admin_listen": "127.0.0.1:0", "retries": 1},
        ring={"balance_factor": 0}, health={"fall": 2, "backoff": "60s"}, cache={"size": "1m", "min_uses": 1}))
    proxy = harness.Proxy(RP, path=path)
    aport = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    # a miss, then a hit, with a referer and a user agent
    hdrs = {"Referer": "http://example.com/page", "User-Agent": "Tester/1.0 (\"quoted\")"}
    want = []
    for i in range(40):
        st, h, body = harness.get(proxy.port, f"/img/{i}.jpg", headers=hdrs)
        want.append((f"/img/{i}.jpg", st, h.get("x-ringproxy-backend")))
    st2, h2, _ = harness.get(proxy.port, "/img/0.jpg", headers=hdrs)
    bad, rd = harness.raw(proxy.port, b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    rd.closed()
    lines = lines_of(log, 42)
    parsed = [COMBINED.match(x) for x in lines]
    t.check(len(lines) == 42 and all(parsed), f"42 requests, 42 combined lines, each parsed by the combined regex ({len(lines)})",
            "\n".join(x for x, m in zip(lines, parsed) if not m)[:2000])
    if not all(parsed):
        proxy.stop()
        return
    # each worker writes its own batches: lines are in order per worker,
    # not across them, so they are found by what they say
    rows = [m.groupdict() for m in parsed]
    hits = [r for r in rows if r["cache"] == "hit"]
    gets = [r for r in rows if r["target"].startswith("/img/") and r["cache"] != "hit"]
    by_target = {r["target"]: r for r in gets}
    t.check(len(gets) == 40 and
            all(by_target[p]["status"] == str(st) and by_target[p]["backend"] == "live" for p, st, _ in want),
            "each line has the status the client got, and the backend that served it")
    whys = {r["why"] for r in gets}
    t.check({"owner", "retry", "failover"} <= whys,
            "why: owner for the live backend's keys, retry after the dead one's connect failed, "
            "failover once it is down", str(whys))
    t.check(all(r["cache"] == "miss" for r in gets), "the first GETs are cache misses")
    hit = hits[0] if len(hits) == 1 else {}
    t.check(hit["target"] == "/img/0.jpg" and hit["cache"] == "hit" and hit["why"] == "cache" and
            hit["backend"] == "-" and hit["status"] == "200" and st2 == 200 and
            float(hit["duration"]) <= float(by_target["/img/0.jpg"]["duration"]),
            "the repeat is a hit: cache=hit, why=cache, no backend, quicker than its miss", str(hit))
    up = [r for r in gets if r["backend"] == "live"]
    t.check(up and all(re.fullmatch(r"\d+\.\d{6}", r["upstream_time"]) and
                       float(r["upstream_time"]) <= float(r["duration"]) and r["tier"] == "miss" for r in up),
            "a forwarded request's line: upstream_time, within its duration, and tier=miss (the test cache "
            "sends no Age: its own cache did not answer from store)", str(up[:2]))
    t.check(hit.get("upstream_time") == "-" and hit.get("tier") == "-",
            "a hit's line: no upstream time, no tier verdict", str(hit))
    r0 = by_target["/img/0.jpg"]
    t.check(r0["client"] == "127.0.0.1" and r0["method"] == "GET" and r0["protocol"] == "HTTP/1.1" and
            r0["referer"] == hdrs["Referer"] and r0["user_agent"] == 'Tester/1.0 (\\x22quoted\\x22)' and
            int(r0["bytes"]) > 4096 and 0 < float(r0["duration"]) < 5,
            "client, request line, referer, user agent (quotes escaped), bytes, duration", str(r0))
    r400 = [r for r in rows if r["status"] == "400"]
    t.check(len(r400) == 1 and r400[0]["backend"] == "-" and r400[0]["why"] == "-" and r400[0]["target"] == "/x",
            "the proxy's own 400 is logged with no backend", str(r400))
    rid400 = harness.request_id(bad[0].body) if bad else None
    t.check(rid400 and r400 and r400[0]["request_id"] == rid400,
            "its line's request_id is the one its reply gave the client", f"{rid400} {r400}")

    # SIGUSR1 after a rename: the old file keeps the old lines, the new
    # one gets the next
    os.rename(log, log + ".1")
    since = proxy.log_size()
    proxy.signal(signal.SIGUSR1)
    m = proxy.wait_log(r"SIGUSR1: access log (\S+) reopened", 10, since=since)
    harness.get(proxy.port, "/after/rename.jpg")
    new = lines_of(log, 1)
    time.sleep(0.3)
    with open(log + ".1") as f:
        old = f.read().splitlines()
    t.check(m and len(new) == 1 and "/after/rename.jpg" in new[0] and len(old) == 42,
            "SIGUSR1 after a rename: the next line goes to a new file, the old one is left as it was",
            f"{new} {len(old)}")

    # JSON lines, by a reload
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("access_format = combined", "access_format = json"))
    out = proxy.reload()
    t.check(out and out.startswith("reload"), "a reload switches the format", str(out))
    harness.get(proxy.port, "/json/1.jpg", headers=hdrs)
    harness.get(proxy.port, "/json/1.jpg", headers=hdrs)
    new = lines_of(log, 3)
    try:
        docs = sorted((json.loads(x) for x in new[1:]), key=lambda d: d["cache"] != "miss")
    except ValueError as e:
        docs = []
        t.note(f"not JSON: {e}: {new[1:]}")
    keys = {"client", "time", "method", "target", "protocol", "status", "bytes", "referer", "user_agent",
            "duration", "backend", "cache", "why", "upstream_time", "tier", "request_id"}
    t.check(len(docs) == 2 and all(keys <= set(d) for d in docs) and
            docs[0]["target"] == "/json/1.jpg" and docs[0]["status"] == 200 and docs[0]["cache"] == "miss" and
            docs[1]["cache"] == "hit" and docs[1]["backend"] is None and
            isinstance(docs[0]["upstream_time"], float) and docs[0]["tier"] == "miss" and
            docs[1]["upstream_time"] is None and docs[1]["tier"] is None and
            docs[0]["user_agent"] == hdrs["User-Agent"] and isinstance(docs[0]["duration"], float),
            "JSON lines with the same names; the user agent's quotes come back intact", str(docs))
    # a request with a body large enough to move through the read buffer:
    # its line still has its method and target
    st, _, echoed = harness.get(proxy.port, "/upload/x.jpg?k=v", method="POST", body=b"z" * 300000)
    new = lines_of(log, 4)
    post = json.loads(new[3]) if len(new) > 3 else {}
    t.check(st == 200 and post.get("method") == "POST" and post.get("target") == "/upload/x.jpg?k=v" and
            post.get("bytes", 0) > 300000 and post.get("cache") in ("bypass", "request", "miss") and
            post.get("user_agent") == "" and post.get("referer") == "",
            "a POST with a 300 KB body: its line has its method, target and the bytes sent back "
            "(no referer or user agent: the body's bytes may have replaced its head's)", str(post))
    t.check(json.loads(admin(aport, "/stats"))["access_log_dropped"] == 0, "nothing dropped on a writable file")
    proxy.stop()

    # spill: the owner at its max_inflight sends the second of two
    # concurrent requests for one key to the next backend
    other = harness.Cache(TC, "other")
    slog = harness.tmp_path(f"access-spill.{time.monotonic_ns()}.log")
    conf = conf_with_log([live, other], slog, ring={"balance_factor": 0},
                         backend={"live": {"max_inflight": 1}, "other": {"max_inflight": 1}})
    proxy = harness.Proxy(RP, conf, tag="spill")
    results = []
    first = threading.Thread(target=lambda: results.append(harness.get(proxy.port, "/hot.jpg?delay=600")))
    first.start()
    time.sleep(0.2)
    results.append(harness.get(proxy.port, "/hot.jpg?delay=600"))
    first.join()
    rows = [COMBINED.match(x) for x in lines_of(slog, 2)]
    whys = sorted((m.group("why"), m.group("backend")) for m in rows if m)
    t.check(len(whys) == 2 and [w for w, _ in whys] == ["owner", "spill"] and whys[0][1] != whys[1][1] and
            all(r[0] == 200 for r in results),
            "two concurrent requests for a key whose owner takes one: owner, then spill to another backend",
            str(whys))
    proxy.stop()

    # a log that cannot be written: lines dropped and counted, requests served
    conf = conf_with_log([live], "/dev/full", proxy={"admin_listen": "127.0.0.1:0"}, ring={"balance_factor": 0})
    proxy = harness.Proxy(RP, conf, tag="full")
    aport = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    ok, took, dropped = serve_counting_drops(proxy, aport, "/full/", 200, lambda d: d >= 200)
    t.check(ok == 200 and dropped == 200, "/dev/full: every request served, every line counted as dropped",
            f"{ok} served in {took:.2f} s, {dropped} dropped")
    proxy.stop()

    refused_headers(live)
    hits_sampled(live)
    to_syslog(live)


def hits_sampled(live):
    """[log] access_hits = none: a miss and its repeats give one line, the
    miss's; 1/5: one in five of the hits, the first of each five (one
    worker: one count)."""
    log = harness.tmp_path(f"access-hits.{time.monotonic_ns()}.log")
    path = harness.write("access-hits.ini", conf_with_log([live], log, proxy={"workers": 1},
                                                          cache={"size": "1m", "min_uses": 1}) +
                         "access_hits = none\n")
    proxy = harness.Proxy(RP, path=path, tag="hits")
    for i in range(21):
        harness.get(proxy.port, "/hits/a.jpg")
    harness.get(proxy.port, "/hits/b.jpg")
    lines = lines_of(log, 2)
    time.sleep(0.3)
    with open(log) as f:
        lines = f.read().splitlines()
    t.check(len(lines) == 2 and all("cache=miss" in x for x in lines),
            "access_hits = none: 22 requests, 20 of them hits: only the two misses are logged", "\n".join(lines))
    with open(path) as f:
        text = f.read()
    harness.write("access-hits.ini", text.replace("access_hits = none", "access_hits = 1/5"))
    out = proxy.reload()
    for i in range(20):
        harness.get(proxy.port, "/hits/a.jpg")
    lines = lines_of(log, 6)
    time.sleep(0.3)
    with open(log) as f:
        lines = f.read().splitlines()
    t.check(out and out.startswith("reload") and len(lines) == 6 and all("cache=hit" in x for x in lines[2:]),
            "access_hits = 1/5: 20 hits, 4 lines", "\n".join(lines))
    proxy.stop()


def refused_headers(live):
    """A request refused for a bad byte in a header value logs only
    bytes it sent: one worker, so the second connection gets the memory
    the first gave back (its header array, and with a grown buffer a
    freed one)."""
    victim = (b"GET /account HTTP/1.1\r\nHost: h.example\r\nAccept: */*\r\n"
              b"Cookie: session=VICTIM-TOKEN\r\nConnection: close\r\n\r\n")
    bad = b"GET /a HTTP/1.1\r\nHost: h\r\nX: y\r\nUser-Agent: \x01\r\n\r\n"
    big = (b"GET /big-ua HTTP/1.1\r\nHost: h\r\nUser-Agent: " + b"U" * 6000 +
           b"\r\nConnection: close\r\n\r\n")
    for tag, first, extra in (("cookie", victim, {}), ("grown", big, {"buffer_size": "1m"})):
        log = harness.tmp_path(f"access-{tag}.{time.monotonic_ns()}.log")
        proxy = harness.Proxy(RP, conf_with_log([live], log, proxy=dict(workers=1, **extra)), tag=tag)
        got = []
        for req in (first, bad):
            try:
                r, rd = harness.raw(proxy.port, req)
                got.append(r[0].status)
                rd.s.close()
            except (OSError, EOFError) as e:
                got.append(repr(e))
        lines = lines_of(log, 2)
        rows = [COMBINED.match(x) for x in lines]
        second = rows[1].groupdict() if len(rows) == 2 and rows[1] else {}
        t.check(got == [200, 400] and proxy.alive() and second.get("status") == "400" and
                second.get("user_agent") == "-" and not any("VICTIM" in x or "UUUU" in x for x in lines[1:]),
                f"{tag}: a request refused for \\x01 in its User-Agent after "
                f"{'one with a session cookie' if tag == 'cookie' else 'a 6,000-byte User-Agent'} "
                "logs no user agent (-), not the earlier request's bytes", f"{got} {lines}")
        proxy.stop()



def to_syslog(live):
    """[log] access = syslog:...: a fake receiver on loopback."""
    line = COMBINED.pattern[1:-1]
    udp = harness.Syslog()
    proxy = harness.Proxy(RP, conf_with_log([live], udp.spec, proxy={"workers": 2}), tag="syslog-udp")
    for i in range(30):
        harness.get(proxy.port, f"/sys/{i}.jpg")
    harness.wait_until(lambda: len(udp.messages()) >= 30, 5)
    got = udp.messages()
    r5424 = re.compile(r"^<190>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S+ ringproxy " + str(proxy.pid) +
                       r" access - (?P<line>" + line + ")$")
    rows = [r5424.match(m) for m in got]
    t.check(len(got) == 30 and all(rows) and
            sorted(COMBINED.match(r.group("line")).group("target") for r in rows) ==
            sorted(f"/sys/{i}.jpg" for i in range(30)),
            "syslog:127.0.0.1:PORT: one UDP datagram a request, RFC 5424 (local7.info, ringproxy, pid), "
            "the combined line after the header", "\n".join(got[:3]))
    proxy.stop()
    udp.stop()

    # a local socket (RFC 3164), a receiver that never reads: never waited for
    sock = harness.tmp_path(f"log.{time.monotonic_ns()}.sock")
    stalled = harness.Syslog(sock, read=False)
    proxy = harness.Proxy(RP, conf_with_log([live], stalled.spec, proxy={"workers": 2,
                                                                         "admin_listen": "127.0.0.1:0"}),
                          tag="syslog-stalled")
    aport = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    n = 2000
    ok, took, dropped = serve_counting_drops(proxy, aport, "/stall/", n, lambda d: d > 0)
    time.sleep(0.3)                      # the last batch's flush
    dropped = json.loads(admin(aport, "/stats"))["access_log_dropped"]
    queued = stalled.drain()
    r3164 = re.compile(r"^<190>\w{3} [ \d]\d \d\d:\d\d:\d\d ringproxy\[" + str(proxy.pid) + r"\]: " + line + "$")
    t.check(ok == n and dropped > 0 and len(queued) + dropped == n and all(r3164.match(m) for m in queued),
            f"a stalled local receiver: all {n} requests served, the lines its queue held are there in RFC "
            "3164 framing, the rest counted as dropped (none waited for)",
            f"{ok} served in {took:.2f} s, {len(queued)} queued, {dropped} dropped; {queued[:1]}")

    # the receiver restarts (a new socket at the path): lines come back
    stalled.restart()
    def back():
        harness.get(proxy.port, "/after-restart.jpg")
        return any("/after-restart.jpg" in m for m in stalled.messages())
    t.check(harness.wait_until(back, 5, step=0.3), "after the receiver restarts, lines reach it again")
    proxy.stop()
    stalled.stop()

    bad = harness.write("syslog-bad.ini", "[backend a]\nurl = http://127.0.0.1:1\n[log]\naccess = syslog:127.0.0.1:0\n")
    r = subprocess.run([RP, "-t", "-c", bad], capture_output=True, text=True, timeout=30)
    t.check(r.returncode == 1 and f"{bad}:4: access: syslog:127.0.0.1:0: a syslog server needs a port" in r.stderr,
            "-t: a syslog target without a port is FILE:LINE", r.stderr)


harness.run_main(t, main)
