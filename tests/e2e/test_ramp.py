#!/usr/bin/env python3
"""test_ramp.py -- the warm ramp ([ring] ramp) as clients and an operator
see it, with a short window. Two ringproxy instances run from one file of
four test caches; a fifth is added and both reload. During the window each
moved key is served by its previous owner until its own moment, start +
ramp * u(k) (u from the key's MD5 bytes 8..15, computed here with hashlib),
then by the new cache: the test asks both proxies for every moved key and
a sample of the others, again and again, and checks that

  - every answer is the one the schedule gives for the time it was asked
    (keys whose moment falls inside a request's flight may go either way),
  - the share of moved keys at the new cache rises as t / ramp,
  - no key flips back, and unmoved keys never reach the new cache,
  - the two proxies agree key by key, but for keys whose moment falls
    between their two reloads, and on every key after the window,
  - /stats shows the ramp (start, end, share switched), the reload line
    says "ramping over 6s";

then that a previous owner that is down hands its held keys to their new
owner at once, and gets them back when it returns; and that with ramp = 0
a reload moves every key at once, as before (no ramp in /stats, every key
at its new owner at the first request).
usage: test_ramp.py RINGPROXY TESTCACHE"""

import hashlib
import http.client
import json
import os
import re
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
RAMP = 6.0
KEYS = [f"/thumbs/{i % 613}/{i}_{(64, 128, 256)[i % 3]}.jpg" for i in range(3000)]
# a key whose moment is this close to a request's flight may go either
# way: the proxy's clock is coarse (a few ms) and its start is stamped
# just before the snapshot is handed to the workers
SLACK = 0.03


def u_of(key):
    """The key's place in the window: MD5 bytes 8..15 over 2^64."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[8:16], "big") / 2.0 ** 64


U = {k: u_of(k) for k in KEYS}


def routes_timed(port, keys, batch=50):
    """[(key, backend, t_sent, t_answered)] through the proxy at port,
    pipelining batch HEADs at a time; times are time.time() around the
    batch."""
    out = []
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    rd = H.Reader(s)
    try:
        for i in range(0, len(keys), batch):
            part = keys[i:i + batch]
            t0 = time.time()
            s.sendall(b"".join(f"HEAD {k} HTTP/1.1\r\nHost: ramp\r\n\r\n".encode() for k in part))
            got = []
            for k in part:
                r = rd.response(head_only=True)
                got.append((k, r.h("X-Ringproxy-Backend") if r.status == 200 else f"status {r.status}"))
            t1 = time.time()
            out += [(k, b, t0, t1) for k, b in got]
    finally:
        s.close()
    return out


def ring_targets(port, keys):
    """{key: /ring?url=key's JSON} from the admin listener at port, on one
    connection."""
    out = {}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for k in keys:
            c.request("GET", "/ring?url=" + urllib.parse.quote(k, safe=""))
            r = c.getresponse()
            body = r.read()
            out[k] = json.loads(body) if r.status == 200 else {"status": r.status}
    finally:
        c.close()
    return out




def stats(port):
    st, _, body = H.get(port, "/stats")
    return json.loads(body) if st == 200 else {}


def main():
    names = ["c1", "c2", "c3", "c4", "c5"]
    caches = {n: H.Cache(TC, n) for n in names}
    ports = {n: c.port for n, c in caches.items()}
    proxy = {"admin_listen": "127.0.0.1:0", "workers": 2}
    health = {"path": "/__health", "interval": "200ms", "rise": 1, "fall": 1}

    def conf(members, ramp, backend=None):
        # the access log on stderr (the proxy's log) says why each request
        # went where it did
        return H.conf_text([(n, ports[n]) for n in members], proxy=proxy,
                           ring={"balance_factor": 0, "ramp": ramp}, health=health,
                           backend=backend) + "\n[log]\naccess = stderr\n"

    path = H.write("ramp.ini", conf(names[:4], "0"))
    r4 = ringref.ring_of(path)
    pa = H.Proxy(RP, tag="ramp-a", path=path)
    pb = H.Proxy(RP, tag="ramp-b", path=path)
    pa.wait_checked(names[:4])
    pb.wait_checked(names[:4])
    aa, ab = pa.admin_port(), pb.admin_port()

    # ---- ramp = 0: today's behaviour, every moved key at once -----------
    H.write("ramp.ini", conf(names, "0"))
    r5 = ringref.ring_of(path)
    old = {k: r4.lookup(k.encode()) for k in KEYS}
    new = {k: r5.lookup(k.encode()) for k in KEYS}
    moved = [k for k in KEYS if old[k] != new[k]]
    unmoved = [k for k in KEYS if old[k] == new[k]]
    t.check(moved and all(new[k] == "c5" for k in moved),
            f"adding c5 moves {len(moved)} of {len(KEYS)} keys, all to c5 (the model)")
    mark = pa.log_size()
    line = pa.reload()
    pa.wait_checked(["c5"], since=mark)  # a cache a reload adds takes keys after its first check
    got = dict((k, b) for k, b, _, _ in routes_timed(pa.port, KEYS))
    t.check(line and "+c5" in line and "ramping" not in line, f"ramp = 0: the reload line says no ramp ({line})")
    t.check(stats(aa).get("ramp", "absent") is None, "ramp = 0: /stats has \"ramp\": null")
    wrong = [k for k in KEYS if got.get(k) != new[k]]
    t.check(not wrong, f"ramp = 0: at the first request after the reload every key is at its new owner "
            f"({len(wrong)} not)", "\n".join(f"{k}: {got.get(k)} vs {new[k]}" for k in wrong[:10]))
    H.write("ramp.ini", conf(names[:4], "6s"))
    line = pa.reload()
    got = dict((k, b) for k, b, _, _ in routes_timed(pa.port, KEYS))
    t.check(line and "-c5" in line and "ramping" not in line and
            all(got.get(k) == old[k] for k in KEYS),
            f"removing c5 (ramp = 6s): its keys go back at once, nothing to ramp from ({line})")

    # ---- ramp = 6s: add c5, both proxies reload --------------------------
    H.write("ramp.ini", conf(names, "6s"))
    ma, mb = pa.log_size(), pb.log_size()
    la, lb = pa.reload(), pb.reload()
    pa.wait_checked(["c5"], since=ma)
    pb.wait_checked(["c5"], since=mb)
    t.check(la and lb and "ramping over 6s" in la and "ramping over 6s" in lb,
            f"both reload lines say 'ramping over 6s' ({la} | {lb})")
    sa, sb = stats(aa).get("ramp"), stats(ab).get("ramp")
    t.check(sa and sb and sa["in_progress"] and sb["in_progress"] and
            abs(sa["end"] - sa["start"] - RAMP) < 0.002 and abs(sb["end"] - sb["start"] - RAMP) < 0.002 and
            abs(sa["start"] - time.time()) < 3 and 0.15 < sa["moved_share"] < 0.3 and sa["rings"] == 2,
            f"/stats: a ramp in progress with start, end = start + 6s, the moved share ({sa})")
    start = {"a": sa["start"] if sa else 0, "b": sb["start"] if sb else 0}
    t.note(f"the two reloads began {abs(start['a'] - start['b']) * 1000:.0f} ms apart")
    sample = moved + unmoved[::4]
    rounds = []             # [{proxy: [(key, backend, t0, t1)]}]
    shares = []             # the schedule's switched share from /stats, with elapsed
    end = max(start.values()) + RAMP + 0.3
    while time.time() < end and len(rounds) < 200:
        rnd = {"a": [], "b": []}
        for i in range(0, len(sample), 50):
            part = sample[i:i + 50]
            rnd["a"] += routes_timed(pa.port, part)
            rnd["b"] += routes_timed(pb.port, part)
        rounds.append(rnd)
        before = time.time()
        st = stats(aa).get("ramp") or {}
        shares.append(((before - start["a"]) / RAMP, st.get("switched_share", -1)))
    t.note(f"{len(rounds)} rounds of {len(sample)} keys on each proxy during the window")

    # every answer as the schedule says, at the time it was asked
    bad, either, last, flips, strays = [], 0, {}, [], []
    for rnd in rounds:
        for p, answers in rnd.items():
            for k, b, t0, t1 in answers:
                if old[k] == new[k]:
                    if b != old[k]:
                        strays.append((p, k, b))
                    continue
                due = start[p] + RAMP * U[k]
                if t1 < due - SLACK:
                    want = old[k]
                elif t0 > due + SLACK:
                    want = new[k]
                else:
                    either += 1
                    want = b if b in (old[k], new[k]) else old[k]
                if b != want:
                    bad.append((p, k, b, want, round(t0 - start[p], 3), round(due - start[p], 3)))
                if last.get((p, k)) == new[k] and b == old[k]:
                    flips.append((p, k))
                last[(p, k)] = b
    t.check(rounds and not bad, f"every answer is the schedule's: the old owner before the key's moment, c5 "
            f"after ({len(bad)} not; {either} asked within {SLACK * 1000:.0f} ms of their moment)",
            "\n".join(map(str, bad[:10])))
    t.check(not flips, f"no key flips back to its old owner once at c5 ({len(flips)} did)")
    t.check(not strays, f"unmoved keys never leave their owner, never reach c5 ({len(strays)} did)",
            "\n".join(map(str, strays[:10])))

    # the share rises as t / ramp: every answer for a moved key, binned by
    # the time into its proxy's window when it was asked
    bins = {}
    for rnd in rounds:
        for p, answers in rnd.items():
            for k, b, t0, t1 in answers:
                if old[k] != new[k]:
                    x = min(max(((t0 + t1) / 2 - start[p]) / RAMP, 0.0), 1.0)
                    bins.setdefault(min(int(x * 10), 10), []).append((x, b == new[k], (t1 - t0) / RAMP))
    rows, far = [], []
    for i in sorted(bins):
        v = bins[i]
        if len(v) < 30:
            continue
        x = sum(a for a, _, _ in v) / len(v)
        share = sum(1 for _, at_new, _ in v if at_new) / len(v)
        # u is uniform and independent of the key list's order: binomial
        # error (4 sigma), plus half a batch's flight
        tol = 4 * (max(x * (1 - x), 0.01) / len(v)) ** 0.5 + max(w for _, _, w in v) / 2 + 0.01
        rows.append(f"t/ramp {x:.3f}: {share:.3f} of {len(v)} answers for moved keys from c5 (+-{tol:.3f})")
        if abs(share - x) > tol:
            far.append(rows[-1])
    for r in rows:
        t.note(r)
    t.check(len(rows) >= 5 and not far, f"the share of moved keys served by c5 rises as t / ramp "
            f"({len(rows)} tenths of the window)", "\n".join(far))
    mid_shares = [(x, s) for x, s in shares if 0.1 < x < 0.9]
    t.check(mid_shares and all(abs(s - x) < 0.1 for x, s in mid_shares),
            f"/stats switched_share follows the time into the window ({mid_shares[:3]})")

    # the two proxies: alike but for keys whose moment fell between their starts
    gap = abs(start["a"] - start["b"])
    unexplained = []
    differ = 0
    for rnd in rounds:
        ba = {k: (b, t0, t1) for k, b, t0, t1 in rnd["a"]}
        for k, b, t0, t1 in rnd["b"]:
            if ba[k][0] == b:
                continue
            differ += 1
            # disagreement is legitimate only where the key's moment lies
            # between the two proxies' views of the window
            ea = (ba[k][1] - start["a"], ba[k][2] - start["a"])
            eb = (t0 - start["b"], t1 - start["b"])
            lo, hi = min(ea[0], eb[0]) - SLACK, max(ea[1], eb[1]) + SLACK
            if not (lo <= RAMP * U[k] <= hi):
                unexplained.append((k, ba[k][0], b, round(RAMP * U[k], 3), ea, eb))
    t.check(not unexplained, f"the two proxies agree key by key: {differ} answers differed, each a key whose "
            f"moment fell between the two proxies' requests (reloads {gap * 1000:.0f} ms apart)",
            "\n".join(map(str, unexplained[:10])))

    # after the window: both alike, every key at its new owner
    H.wait_until(lambda: time.time() > end, 10)
    ga = dict((k, b) for k, b, _, _ in routes_timed(pa.port, KEYS))
    gb = dict((k, b) for k, b, _, _ in routes_timed(pb.port, KEYS))
    t.check(all(ga.get(k) == gb.get(k) == new[k] for k in KEYS),
            "after the window both proxies route every key to its new owner")
    st = stats(aa)
    held = sum(b["ramp_held"] for b in st["backends"])
    moved_in = {b["name"]: b["ramp_moved_in"] for b in st["backends"]}
    t.check(st["ramp"] and not st["ramp"]["in_progress"] and st["ramp"]["switched_share"] == 1 and
            held > 0 and moved_in["c5"] > 0 and sum(moved_in.values()) == moved_in["c5"],
            f"/stats after the window: over, all switched; {held} requests were held on old owners, "
            f"{moved_in['c5']} went to c5 as moved keys")

    # ---- a previous owner that is down holds nothing back ------------------
    H.write("ramp.ini", conf(names[:4], "0"))
    pa.reload()
    H.write("ramp.ini", conf(names, "60s"))
    line = pa.reload()
    rstart = stats(aa)["ramp"]["start"]
    late = [k for k in moved if old[k] == "c1" and U[k] > 0.5]
    others = [k for k in moved if old[k] != "c1" and U[k] > 0.5]
    t.check(line and "ramping over 1m" in line and late and others,
            f"a 60s ramp: {len(late)} of c1's moved keys are held until at least 30s ({line})")
    mark = pa.log_size()
    got = dict((k, b) for k, b, _, _ in routes_timed(pa.port, late + others))
    t.check(all(got[k] == "c1" for k in late) and all(got[k] == old[k] for k in others),
            "held keys at their previous owners (c1 among them)")
    k = late[0]
    m = pa.wait_log(r'"HEAD ' + re.escape(k) + r' HTTP/1\.1" 200 .* backend=(\S+) .* why=(\S+)', since=mark)
    t.check(m and m.group(1) == "c1" and m.group(2) == "ramp",
            "the access log says why a held key went to its previous owner: why=ramp",
            m.group(0) if m else pa.log()[mark:mark + 2000])
    # /ring?url= says what a request meets during the ramp: the held owner
    # is the target, named as held, reason "ramp"; keys the ramp did not
    # move or has switched are at their owner
    unmoved = [k for k in KEYS if k not in moved][:200]
    time.sleep(1)
    switched = [k for k in moved if rstart + 60 * U[k] < time.time() - 0.1]
    sample = late + others + unmoved + switched
    t0 = time.time()
    where = ring_targets(aa, sample)
    got = dict((k, b) for k, b, _, _ in routes_timed(pa.port, sample))
    t1 = time.time()
    # a moved key whose moment fell between its /ring and its request
    # may rightly differ
    racing = {k for k in moved if t0 - SLACK <= rstart + 60 * U[k] <= t1 + SLACK}
    diff = [(k, where[k].get("target"), got[k]) for k in sample
            if where[k].get("target") != got[k] and k not in racing]
    held_ok = all(where[k]["held"] == old[k] and where[k]["reason"] == "ramp" and
                  where[k]["ramp"]["previous_owner"] == old[k] and where[k]["ramp"]["held"] and
                  where[k]["owner"] == "c5" for k in late + others if k not in racing)
    t.check(not diff and held_ok and switched and all(where[k]["held"] is None for k in unmoved + switched) and
            all(where[k]["ramp"] is None for k in unmoved) and
            all(where[k]["ramp"]["held"] is False for k in switched),
            f"/ring?url= during the ramp: its target is the backend that served each of {len(sample)} "
            f"requests ({len(late + others)} held on their previous owner: held and reason 'ramp'; "
            f"{len(switched)} switched to c5; {len(unmoved)} not moved; {len(racing & set(sample))} "
            f"switching meanwhile not compared)", str(diff[:5]))
    _, _, text = H.get(aa, "/ring?format=text&url=" + urllib.parse.quote(late[0], safe=""))
    text = text.decode()
    t.check("goes to   c1 (ramp: held on its previous owner" in text and
            "ramp      moved from c1 by the warm ramp, held there for" in text,
            "/ring?format=text says the key goes to its held owner and why", text)
    caches["c1"].stop()
    t.check(pa.wait_log(r"backend c1: up -> down"), "c1 stopped: marked down")
    where = ring_targets(aa, late + others)
    got = dict((k, b) for k, b, _, _ in routes_timed(pa.port, late + others))
    t.check(all(where[k]["target"] == got[k] for k in late + others) and
            all(where[k]["held"] is None and where[k]["ramp"]["verdict"] == "down" for k in late),
            "c1 down: /ring's target for its held keys is their new owner, as the requests found, "
            "and the ramp part says the held owner is down",
            str([(k, where[k]["target"], got[k]) for k in late + others if where[k]["target"] != got[k]][:5]))
    t.check(all(got[k] == "c5" for k in late) and all(got[k] == old[k] for k in others) and
            time.time() < rstart + 30,
            "c1 down: its held keys go to their new owner at once; other held keys stay put")
    caches["c1"].start(caches["c1"].port)
    t.check(pa.wait_log(r"backend c1: down -> up"), "c1 back up")
    got = dict((k, b) for k, b, _, _ in routes_timed(pa.port, late))
    t.check(all(got[k] == "c1" for k in late) and time.time() < rstart + 30,
            "c1 up again before their moment: its held keys are served by it again")


H.run_main(t, main)
