#!/usr/bin/env python3
"""test_health.py -- passive and active health checks as a client and an
operator see them: a cache killed under load (no failed GET, its keys on
the next backends of ringref.py's walk, back after rise checks when it
returns on the same port), a cache slower than response_timeout (down
after fall, with the log line), a failing health path (down with the
status in the log, up after rise), `ringproxy -t --probe`, [health]
config errors with FILE:LINE, and a backend added with active checks on:
`checking` with no traffic until its first check (down after a failed one,
up after a passed one), the ring serving as is at start.
usage: test_health.py RINGPROXY TESTCACHE"""

import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()

caches = [H.Cache(TC, f"cache-{i}") for i in range(4)]
names = [c.name for c in caches]
ring = ringref.Ring([(n, 1.0) for n in names], 160)


def keys_of(name, n, prefix="/k/"):
    """n keys whose ring owner is name."""
    return ring.keys_of(name, n, prefix)


def next_up(key, down):
    return next(n for n in ring.walk(key.encode()) if n not in down)


def served_by(port, keys):
    """{key: (status, backend)} of one GET each."""
    out = {}
    for k in keys:
        st, hd, _ = H.get(port, k)
        out[k] = (st, hd.get("x-ringproxy-backend"))
    return out


# Exact routing is asserted with bounded loads off: with them on, a key
# whose backend still counts the previous request in flight (released just
# after the client has the response) may rightly spill at this tiny load.
RING = {"balance_factor": 0}
ACTIVE = {"path": "/__health", "interval": "200ms", "timeout": "300ms", "rise": 2, "fall": 2}

# ---- 1. kill -9 under load, restart on the same port ------------------
victim = caches[2]
p = H.Proxy(RP, H.conf_text(caches, ring=RING, health=ACTIVE, proxy={"connect_timeout": "500ms"}))
t.check(p.wait_log(r"listening on", 1) is not None, "ringproxy started with active checks")
t.check(p.wait_checked([c.name for c in caches]), "... and each cache passed its first check")
vkeys = keys_of(victim.name, 30)
before = served_by(p.port, vkeys)
t.check(all(v == (200, victim.name) for v in before.values()),
        f"the victim's {len(vkeys)} keys are served by {victim.name}", before)


def cold(i):
    return f"/load/{i % 5000}.jpg?delay=5"


import threading  # noqa: E402
result = {}
mark = p.log_size()
# run until the work is done: the kill after 600 requests, 2,400 more after it
th = threading.Thread(target=lambda: result.setdefault(
    "r", H.load_until(p.port, cold, clients=16, requests=3000, at=(600, victim.kill9))))
th.start()
th.join(150)
res = result.get("r", [])
failed = [r for r in res if r[1] != 200]
t.check(len(res) == 3000 and not failed,
        f"kill -9 of {victim.name} under load: {len(res)} GETs, none failed", failed[:5])
t.check(p.wait_log(rf"backend {victim.name}: up -> down", 5, mark) is not None,
        f"{victim.name} is marked down (log)", p.log())
after = served_by(p.port, vkeys)
want = {k: (200, next_up(k, {victim.name})) for k in vkeys}
t.check(after == want, "its keys go to the next distinct backend of the walk",
        {k: (after[k], want[k]) for k in vkeys if after[k] != want[k]})
others = keys_of(caches[0].name, 10)
t.check(all(v == (200, caches[0].name) for v in served_by(p.port, others).values()),
        "the other backends' keys do not move")
mark = p.log_size()
victim.start(victim.port)
m = p.wait_log(rf"backend {victim.name}: down -> up \((.*)\)", 10, mark)
t.check(m is not None and "health check passed x2" in m.group(1),
        f"restarted on port {victim.port}: up after rise = 2 checks (log)", p.log())
back = served_by(p.port, vkeys)
t.check(all(v == (200, victim.name) for v in back.values()),
        f"its keys return to {victim.name}", {k: v for k, v in back.items() if v != (200, victim.name)})
t.check(p.stop() == 0, "SIGTERM: exit 0")

# ---- 2. a backend slower than response_timeout: down after fall -----------
slow = caches[1]
p = H.Proxy(RP, H.conf_text(caches, ring=RING, health={"fall": 3, "backoff": "2s"},
                            proxy={"response_timeout": "300ms", "workers": 1}))
slow.admin("/__set?delay=2000")
skeys = keys_of(slow.name, 8, "/s/")
mark = p.log_size()
got = served_by(p.port, skeys[:3])
t.check(all(v[0] == 504 for v in got.values()),
        "3 requests past response_timeout get 504", got)
m = p.wait_log(rf"backend {slow.name}: up -> down \((.*)\)", 3, mark)
t.check(m is not None and m.group(1).endswith("x3"),
        f"{slow.name} is marked down after fall = 3 timeouts (log: {m.group(0) if m else None})", p.log())
got = served_by(p.port, skeys[3:])
want = {k: (200, next_up(k, {slow.name})) for k in skeys[3:]}
t.check(got == want, "then its keys go to the next backend of the walk, 200", got)
slow.admin("/__set?delay=0")
# no active checks: after the back-off one request is a trial
mark = p.log_size()
time.sleep(2.2)
got = served_by(p.port, skeys[3:4])
m = p.wait_log(rf"backend {slow.name}: down -> up \((.*)\)", 2, mark)
t.check(m is not None and got[skeys[3]] == (200, slow.name),
        f"fast again, after backoff = 2s: a trial request brings it up (log: {m.group(0) if m else None})",
        str(got) + "\n" + p.log())
got = served_by(p.port, skeys)
t.check(all(v == (200, slow.name) for v in got.values()), "and its keys return", got)
t.check(p.stop() == 0, "SIGTERM: exit 0")

# ---- 3. a failing health path: down with the reason, up after rise -------
sick = caches[3]
p = H.Proxy(RP, H.conf_text(caches, ring=RING, health=ACTIVE))
p.wait_checked([c.name for c in caches])
hkeys = keys_of(sick.name, 10, "/h/")
mark = p.log_size()
# requests delayed 400 ms are in flight at the cache when it goes down and
# succeed afterwards: they must not bring it back (only checks may)
slowk = [k + "?delay=400" for k in hkeys[:4]]
bg = {}
th = threading.Thread(target=lambda: bg.setdefault(
    "r", H.load(p.port, lambda i: slowk[i % 4], clients=8, seconds=1.2, max_requests=200)))
th.start()
time.sleep(0.1)
sick.admin("/__set?health=500")
m = p.wait_log(rf"backend {sick.name}: up -> down \((.*)\)", 5, mark)
t.check(m is not None and m.group(1) == "health check: status 500, expected 200-399 x2",
        f"/__health 500: down after fall = 2 with the status in the log ({m.group(0) if m else None})",
        p.log())
got = served_by(p.port, hkeys)
t.check(got == {k: (200, next_up(k, {sick.name})) for k in hkeys},
        "while down its keys go to the next backend of the walk", got)
th.join(30)
t.check(bg.get("r") and all(r[1] == 200 for r in bg["r"]),
        f"{len(bg.get('r', []))} slow GETs across the fall: all 200")
time.sleep(0.3)
t.check(p.wait_log(rf"backend {sick.name}: down -> up", 0, mark) is None,
        "it stays down while its checks fail: responses to requests sent before the fall do not bring it up",
        p.log())
mark = p.log_size()
sick.admin("/__set?health=200")
m = p.wait_log(rf"backend {sick.name}: down -> up \((.*)\)", 5, mark)
t.check(m is not None and m.group(1) == "health check passed x2",
        f"/__health 200 again: up after rise = 2 ({m.group(0) if m else None})", p.log())
got = served_by(p.port, hkeys)
t.check(all(v == (200, sick.name) for v in got.values()), "its keys return",
        str({k: v for k, v in got.items() if v != (200, sick.name)}) + "\n" + p.log())
t.check(p.stop() == 0, "SIGTERM: exit 0")


# ---- 3b. passive checks only, every cache gone and back: the tier recovers --
p = H.Proxy(RP, H.conf_text(caches, health={"fall": 1, "backoff": "1s"},
                            proxy={"connect_timeout": "300ms"}))
own = {n: keys_of(n, 1, "/o/")[0] for n in names}
mark = p.log_size()
for c in caches:
    c.kill9()
got = served_by(p.port, list(own.values()))
t.check(all(v[0] in (502, 503) for v in got.values()), "every cache killed: 502/503", got)
H.wait_until(lambda: len(re.findall(r"backend \S+: up -> down", p.log()[mark:])) >= 3, 3)
fell = re.findall(r"backend (\S+): up -> down", p.log()[mark:])
kept = re.findall(r"backend (\S+): .* but it is the last backend up: it stays in service", p.log()[mark:])
t.check(len(fell) == 3 and len(set(fell)) == 3 and len(kept) == 1 and set(fell) | set(kept) == set(names),
        "every backend but the last is marked down; the last one up stays in service (log)", p.log())
for c in caches:
    c.start(c.port)
deadline = time.monotonic() + 6
got = {}
while time.monotonic() < deadline:
    got = served_by(p.port, list(own.values()))
    if all(got[own[n]] == (200, n) for n in names):
        break
    time.sleep(0.2)
t.check(all(got[own[n]] == (200, n) for n in names),
        "caches back on their ports: after the back-off trials bring every backend up, keys at home",
        str(got) + "\n" + p.log())
t.check(all(p.wait_log(rf"backend {n}: down -> up \(a request succeeded after the back-off\)", 3, mark)
            for n in fell), "each recovery is logged")
t.check(p.stop() == 0, "SIGTERM: exit 0")


# ---- 3c. the last backend up drops connections: not a total outage --------


def stats_of(port, name):
    """(state, fails, up) of backend name in /stats, and /health's (status, body)."""
    st, _, body = H.get(port, "/stats")
    b = next(b for b in json.loads(body)["backends"] if b["name"] == name)
    hst, _, hbody = H.get(port, "/health")
    return (b["state"], b.get("fails"), b["up"]), (hst, hbody.decode().strip())


def last_up_drops(px, name, keys, what):
    """Requests for keys that backend name (the last one up) drops after
    reading them: errors for those requests only, and the next normal
    request is served by it."""
    A = px.admin_port()
    mark = px.log_size()
    got = served_by(px.port, [k + "?drop=1" for k in keys[:3]])
    t.check(all(v[0] == 502 for v in got.values()), f"{what}: 3 requests it drops: 502 each", got)
    b, hl = stats_of(A, name)
    t.check(b == ("failing", 3, True) and hl[0] == 503 and "1 failing" in hl[1],
            f"{what}: /stats says failing with 3 failures; /health 503, saying so", f"{b} {hl}")
    t.check(px.wait_log(rf"backend {name}: connection lost before a response x3, but it is the last "
                        r"backend up: it stays in service", 3, mark) and
            not re.search(rf"backend {name}: up -> down", px.log()[mark:]),
            f"{what}: it is not marked down, and the log says why", px.log()[-2000:])
    got = served_by(px.port, keys[3:6])
    t.check(all(v == (200, name) for v in got.values()),
            f"{what}: the next normal requests are served by it (not 503 for the back-off)", got)
    b, hl = stats_of(A, name)
    t.check(b == ("up", 0, True) and hl[0] == 200, f"{what}: a success: up again in /stats and /health",
            f"{b} {hl}")


solo = H.Cache(TC, "solo")
px = H.Proxy(RP, H.conf_text([solo], ring=RING, health={"fall": 3, "backoff": "30s"},
                             proxy={"admin_listen": "127.0.0.1:0"}))
last_up_drops(px, "solo", [f"/solo/{i}.jpg" for i in range(6)], "one backend")
t.check(px.stop() == 0, "SIGTERM: exit 0")

pair = [H.Cache(TC, "pair-a"), H.Cache(TC, "pair-b")]
pring = ringref.Ring([("pair-a", 1.0), ("pair-b", 1.0)], 160)
px = H.Proxy(RP, H.conf_text(pair, ring=RING, health={"fall": 3, "backoff": "30s"},
                             proxy={"admin_listen": "127.0.0.1:0", "connect_timeout": "300ms"}))
mark = px.log_size()
pair[0].kill9()
akeys = [k for k in (f"/pa/{i}.jpg" for i in range(200)) if pring.lookup(k.encode()) == "pair-a"]
got = served_by(px.port, akeys[:3])
t.check(all(v == (200, "pair-b") for v in got.values()) and
        px.wait_log(r"backend pair-a: up -> down", 3, mark),
        "two backends, pair-a killed: down after fall = 3, its keys served by pair-b", got)
last_up_drops(px, "pair-b", [f"/pb/{i}.jpg" for i in range(6)], "pair-a down, pair-b the last up")
t.check(px.stop() == 0, "SIGTERM: exit 0")

# ---- 4. ringproxy -t --probe ----------------------------------------------
def probe(text, name):
    path = H.write(name, text)
    r = subprocess.run([RP, "-t", "--probe", "-c", path], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


base = H.conf_text(caches, health={"path": "/__health", "timeout": "500ms"})
rc, out = probe(base, "probe1.ini")
rows = [l for l in out.splitlines() if l.strip().startswith("cache-")]
t.check(rc == 0, "--probe, all caches up: exit 0", out)
t.check(all(any(l.split()[0] == n and "200 ok" in l and f":{c.port}/__health" in l for l in rows)
            for n, c in zip(names, caches)),
        "--probe prints a row per backend with its URL and '200 ok'", out)
caches[0].stop()
rc, out = probe(base, "probe2.ini")
row = [l for l in out.splitlines() if l.strip().startswith("cache-0 ") and "http://" in l]
t.check(rc == 1 and row and "unreachable" in row[0], "--probe, one cache stopped: exit 1, 'unreachable'", out)
zero = H.conf_text(caches, health={"path": "/__health", "timeout": "500ms"},
                   backend={"cache-0": {"weight": 0}})
rc, out = probe(zero, "probe3.ini")
t.check(rc == 0 and "weight 0: ignored" in out, "--probe, the stopped cache has weight 0: exit 0", out)
caches[1].admin("/__set?health=503")
rc, out = probe(zero, "probe4.ini")
row = [l for l in out.splitlines() if l.strip().startswith("cache-1 ") and "http://" in l]
t.check(rc == 1 and row and "503 unhealthy" in row[0], "--probe, a cache answering 503: exit 1, 'unhealthy'", out)
caches[1].admin("/__set?health=200")

# ---- 5. bad [health] values: FILE:LINE errors --------------------------
bad = H.write("bad-health.ini", """[health]
path = health
interval = 5ms
timeout = 0
rise = 0
fall = 101
expect = 600
passive = maybe
backoff = 1x

[backend a]
url = http://127.0.0.1:1
health_fall = 0
health_expect = 399-200
max_inflight = -1
""")
r = subprocess.run([RP, "-t", "-c", bad], capture_output=True, text=True, timeout=60)
want = [
    f"{bad}:2: path: 'health' is not an absolute path (starting with /) or empty",
    f"{bad}:3: interval: 5ms is out of range; expected 100ms to 1h",
    f"{bad}:4: timeout: 0 is out of range; expected 10ms to 10m",
    f"{bad}:5: rise: 0 is out of range; expected a whole number from 1 to 100",
    f"{bad}:6: fall: 101 is out of range; expected a whole number from 1 to 100",
    f"{bad}:7: expect: 600 is out of range; expected a status code or range from 100 to 599, e.g. 200-399",
    f"{bad}:8: passive: 'maybe' is not on or off",
    f"{bad}:9: backoff: '1x' is not a duration such as 500ms, 5s or 2m",
    f"{bad}:13: health_fall: 0 is out of range; expected a whole number from 1 to 100",
    f"{bad}:14: health_expect: 399-200 is out of range; expected a status code or range from 100 to 599, e.g. 200-399",
    f"{bad}:15: max_inflight: '-1' is not a whole number; expected a whole number from 0 to 1000000",
    f"ringproxy: {bad}: 11 errors; nothing started",
]
t.check(r.returncode == 1, "-t on bad [health] values: exit 1")
t.check(r.stderr.splitlines() == want, "-t prints each bad [health] value as FILE:LINE: what; expected", r.stderr)

# ---- 6. a backend added with active checks on: checking, then down/up ------
def hole_handler(fake, s, n):
    """Read request heads, answer none (connect works, the GET hangs)."""
    for method, target, *_ in fake.requests(s):
        with fake.lock:
            fake.seen.append(f"{method} {target}")


def state_of(port, name):
    _, _, body = H.get(port, "/stats")
    return next((b["state"], b["requests"]) for b in json.loads(body)["backends"] if b["name"] == name)


live = [H.Cache(TC, "ck-a"), H.Cache(TC, "ck-b")]
hole = H.Fake(hole_handler)
hole.seen = []
with socket.socket() as probe_sock:
    probe_sock.bind(("127.0.0.1", 0))
    dead_port = probe_sock.getsockname()[1]      # released: nothing listens
CK = {"path": "/__health", "interval": "1s", "timeout": "1500ms", "rise": 2, "fall": 2}
ckconf = lambda extra: H.conf_text(live + extra, ring=RING, health=CK,  # noqa: E731
                                   proxy={"admin_listen": "127.0.0.1:0", "response_timeout": "1s",
                                          "connect_timeout": "300ms"})
px = H.Proxy(RP, ckconf([]))
A = px.admin_port()
got = served_by(px.port, [f"/ck/start/{i}" for i in range(20)])
t.check(all(v[0] == 200 for v in got.values()),
        "start, every backend checking: requests are served as the ring places them (no 503)", got)
t.check(H.wait_until(lambda: all(state_of(A, c.name)[0] == "up" for c in live), 5),
        "start: each backend up after its first passed check", [state_of(A, c.name) for c in live])
mark = px.log_size()
with open(px.conf, "w") as f:
    f.write(ckconf([("hole", hole.port), ("dead", dead_port)]))
px.reload()
t.check(px.wait_log(r"reload 2:", 10, mark) is not None, "reload adding hole (answers nothing) and dead (refused)")
st = state_of(A, "hole")
t.check(st[0] == "checking", "/stats: the added backend is 'checking' before its first check ends", st)
ck = ringref.Ring([(n, 1.0) for n in ("ck-a", "ck-b", "hole", "dead")], 160)
owned = [k for k in (f"/ck/new/{i}" for i in range(400)) if ck.lookup(k.encode()) in ("hole", "dead")][:40]
got = served_by(px.port, owned)
t.check(all(v[0] == 200 and v[1] in ("ck-a", "ck-b") for v in got.values()),
        "keys the new backends own: served by the others while they are checked", got)
with hole.lock:
    sent = [r for r in hole.seen if r != "GET /__health"]
t.check(sent == [] and state_of(A, "hole")[1] == 0 and state_of(A, "dead")[1] == 0,
        "the checking backends got no request (the health check only)", (sent, hole.seen))
t.check(px.wait_log(r"backend dead: checking -> down \(first health check: connect: Connection refused\)",
                    5, mark) is not None and state_of(A, "dead")[0] == "down",
        "dead: checking -> down after its first check, in the log and /stats", px.log()[mark:][-1500:])
t.check(px.wait_log(r"backend hole: checking -> down \(first health check: timeout", 5, mark) is not None and
        state_of(A, "hole")[0] == "down", "hole: down after its first check timed out", state_of(A, "hole"))
mark = px.log_size()
late = H.Cache(TC, "ck-c")
with open(px.conf, "w") as f:
    f.write(ckconf([("hole", hole.port), ("dead", dead_port), late]))
px.reload()
t.check(px.wait_log(r"backend ck-c: checking -> up \(first health check passed\)", 5, mark) is not None and
        state_of(A, "ck-c")[0] == "up", "a live backend added: up after its first passed check (not rise = 2)",
        px.log()[mark:][-1500:])
t.check(px.stop() == 0, "SIGTERM: exit 0")
hole.stop()

t.done()
