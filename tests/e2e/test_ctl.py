#!/usr/bin/env python3
"""test_ctl.py -- a backend's runtime state as an operator sets it with
`ringproxy ctl -c FILE ready|drain|maint|weight NAME [ARG]` (POST /backend
on the admin listener, with its token), against four test caches:

  - each verb is taken, answers JSON on stdout, and logs one line naming
    who asked (the peer's address) and the share of keys that moved;
  - unknown names, verbs and bad values are refused (404/400, JSON with
    what is valid; ctl exits 1 and prints it), as is leaving no backend
    with keys (409); without the token the listener says 401;
  - maint: not one new request reaches the cache, its keys are served by
    their next owners at once; ready brings them back;
  - drain over a window: at its midpoint about half the cache's keys
    still go to it, each as its moment (MD5 bytes 8..15 of the key) says,
    and at the end none do; /stats and /metrics show the drain's progress;
  - weight: the ring takes the runtime weight (/stats, /metrics);
  - the states survive a reload, and a restart through [proxy]
    state_file (written atomically: no temporary left), where a drain in
    progress goes on from where it had got; a backend a reload removes
    is dropped from the file with a log line.
usage: test_ctl.py RINGPROXY TESTCACHE"""

import hashlib
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
TOKEN = "ctl-test-token"
DRAIN = 6.0


def u_of(key):
    """The key's moment in a ramp's window, as a share of it."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[8:16], "big") / 2.0 ** 64




def stats(port):
    st, _, body = H.get(port, "/stats", headers={"Authorization": "Bearer " + TOKEN})
    return json.loads(body) if st == 200 else {}


def metrics(port):
    return H.get(port, "/metrics", headers={"Authorization": "Bearer " + TOKEN})[2].decode()


def page(port):
    return H.get(port, "/", headers={"Authorization": "Bearer " + TOKEN})[2].decode()


def backend(st, name):
    return next((b for b in st.get("backends", []) if b["name"] == name), {})


def owners(port, keys):
    """{key: the backend that answered} for HEADs of keys, pipelined."""
    return H.routes_on(port, keys, batch=50, host="ctl")


def main():
    caches = {n: H.Cache(TC, n) for n in ("c1", "c2", "c3", "c4")}
    state_file = H.tmp_path("ctl.state")
    proxy = {"admin_listen": "127.0.0.1:0", "admin_token": TOKEN, "workers": 2, "state_file": state_file}

    def conf(names, ramp="0"):
        return H.conf_text([caches[n] for n in names], proxy=proxy, ring={"balance_factor": 0, "ramp": ramp})

    path = H.write("ctl.ini", conf(["c1", "c2", "c3", "c4"]))
    ring = ringref.ring_of(path)
    px = H.Proxy(RP, path=path, tag="ctl")
    A = px.admin_port()
    cli = {"path": None}

    def point_cli(port):
        cli["path"] = H.write("ctl-cli.ini", conf(["c1", "c2", "c3", "c4"]).replace(
            "admin_listen = 127.0.0.1:0", f"admin_listen = 127.0.0.1:{port}"))

    def ctl(*args):
        r = subprocess.run([RP, "ctl", "-c", cli["path"], *args], capture_output=True, timeout=60)
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    point_cli(A)

    # ---- refused inputs ------------------------------------------------------
    rc, out, err = ctl("maint", "nosuch")
    t.check(rc == 1 and "404" in err and '"valid": ["c1", "c2", "c3", "c4"]' in err and not out,
            "ctl maint of an unknown backend: exit 1, 404 with the backends' names", err)
    for args, code, valid in [(("fly", "c1"), 400, '"ready", "drain", "maint", "weight"'),
                              (("drain", "c1", "10parsecs"), 400, "a duration"),
                              (("drain", "c1", "0s"), 400, "a duration"),
                              (("weight", "c1", "-1"), 400, "a number from 0 to 1000"),
                              (("weight", "c1", "heavy"), 400, "a number from 0 to 1000"),
                              (("weight", "c1", "1001"), 400, "a number from 0 to 1000"),
                              (("maint", "c1", "5m"), 400, "drain")]:
        rc, out, err = ctl(*args)
        t.check(rc == 1 and f"({code})" in err and valid in err, f"ctl {' '.join(args)}: refused ({code}), "
                "saying what is valid", err)
    st, _, body = H.get(A, "/backend?name=c1&state=maint", method="POST")
    t.check(st == 401, "POST /backend without the admin token: 401", body)
    st, _, body = H.get(A, "/backend?name=c1&state=maint", headers={"Authorization": "Bearer " + TOKEN})
    t.check(st == 405, "GET /backend: 405 (a change is a POST)", body)
    t.check(all(backend(stats(A), n).get("admin_state") == "ready" for n in caches),
            "after the refusals every backend is still ready")

    # ---- maint: no new request reaches the cache ------------------------------
    keys2 = ring.keys_of("c2", 150)
    before = owners(px.port, keys2)
    t.check(set(before.values()) == {"c2"}, "c2's keys go to c2 while it is ready", set(before.values()))
    mark = px.log_size()
    rc, out, err = ctl("maint", "c2")
    ans = json.loads(out) if rc == 0 else {}
    t.check(rc == 0 and ans.get("admin_state") == "maint" and ans.get("ring_weight") == 0 and
            0.15 < ans.get("moved_share", 0) < 0.35, "ctl maint c2: taken, c2 out of the ring, about a quarter of "
            "the keys moved", out + err)
    line = px.wait_log(r"info: ctl from (127\.0\.0\.1:\d+): maint c2: ([\d.]+)% of keys moved", since=mark)
    t.check(line and abs(float(line.group(2)) - 100 * ans.get("moved_share", 0)) < 0.01,
            "one log line names the peer and the share of keys moved", px.log()[mark:])
    caches["c2"].reset()
    after = owners(px.port, keys2)
    t.check("c2" not in after.values() and all(v in ("c1", "c3", "c4") for v in after.values()),
            "in maint, c2's keys are served by their next owners at once", set(after.values()))
    t.check(caches["c2"].stats()["requests"] == 0, "in maint, not one new request reaches c2",
            caches["c2"].stats())
    t.check(backend(stats(A), "c2").get("admin_state") == "maint" and
            'ringproxy_backend_admin_state{backend="c2",state="maint"} 1' in metrics(A),
            "/stats and /metrics say c2 is in maint")
    t.check(re.search(r'data-backend="c2".*?in maintenance: out of the ring', page(A), re.S),
            "the page says c2 is in maintenance")
    ctl("maint", "c1")
    ctl("maint", "c3")
    rc, out, err = ctl("maint", "c4")
    t.check(rc == 1 and "(409)" in err and "no backend with keys" in err,
            "maint of the last backend with keys: refused (409)", err)
    t.check(backend(stats(A), "c4").get("admin_state") == "ready", "the refused maint left c4 ready")
    for n in ("c1", "c3", "c2"):
        rc, out, err = ctl("ready", n)
    t.check(rc == 0 and json.loads(out).get("admin_state") == "ready" and
            set(owners(px.port, keys2).values()) == {"c2"}, "ctl ready c2: its keys are back on it", out + err)

    # ---- drain: keys leave progressively ---------------------------------------
    keys3 = ring.keys_of("c3", 300)
    t0 = time.time()
    rc, out, err = ctl("drain", "c3", f"{DRAIN:g}s")
    ans = json.loads(out) if rc == 0 else {}
    t.check(rc == 0 and ans.get("admin_state") == "drain" and abs(ans.get("ramp_seconds", 0) - DRAIN) < 0.5,
            f"ctl drain c3 {DRAIN:g}s: taken, ramping over {DRAIN:g}s", out + err)
    t.check(px.wait_log(r"info: ctl from 127\.0\.0\.1:\d+: drain c3 over 6s: [\d.]+% of keys moved.*ramping over 6s"),
            "the drain's log line names the peer, the window and the share moved")
    while time.time() < t0 + DRAIN / 2:
        time.sleep(0.05)
    ts = time.time()
    mid = owners(px.port, keys3)
    te = time.time()
    at3 = [k for k in keys3 if mid[k] == "c3"]
    early = (ts - t0 - 0.3) / DRAIN     # the proxy stamped its start after t0
    late = (te - t0 + 0.05) / DRAIN
    wrong = [k for k in keys3 if (u_of(k) < early and mid[k] == "c3") or (u_of(k) > late and mid[k] != "c3")]
    t.check(0.3 < len(at3) / len(keys3) < 0.7 and not wrong,
            "at the drain's midpoint about half of c3's keys still go to c3, each as its moment says",
            f"{len(at3)} of {len(keys3)} at c3; against the schedule: {wrong[:5]}")
    t.check(all(mid[k] in ("c1", "c2", "c4") for k in keys3 if mid[k] != "c3"),
            "the keys c3 gave up are served by the other caches")
    b3 = backend(stats(A), "c3")
    drain = b3.get("drain") or {}
    t.check(b3.get("admin_state") == "drain" and 0.3 < drain.get("progress", 0) < 0.8 and drain.get("seconds") == DRAIN,
            "/stats shows c3 draining with its progress", b3.get("drain"))
    t.check(re.search(r'data-backend="c3".*?draining: \d+% of its keys gone', page(A), re.S),
            "the page shows the drain's progress")
    m = re.search(r'ringproxy_backend_drain_progress\{backend="c3"\} ([\d.]+)', metrics(A))
    t.check(m and 0.3 < float(m.group(1)) <= 1, "/metrics shows the drain's progress", m and m.group(0))
    while time.time() < t0 + DRAIN + 0.3:
        time.sleep(0.05)
    end = owners(px.port, keys3)
    t.check("c3" not in end.values(), "at the drain's end no key goes to c3: it is out of the ring",
            sum(1 for v in end.values() if v == "c3"))
    t.check(backend(stats(A), "c3").get("points") == 0 and backend(stats(A), "c3")["drain"]["progress"] == 1,
            "/stats: c3 drained (no points, progress 1)")

    # ---- weight ---------------------------------------------------------------
    share = backend(stats(A), "c1").get("share", 0)
    rc, out, err = ctl("weight", "c1", "3")
    b1 = backend(stats(A), "c1")
    t.check(rc == 0 and b1.get("runtime_weight") == 3 and b1.get("ring_weight") == 3 and b1.get("share", 0) > 1.5 * share,
            "ctl weight c1 3: the ring takes the runtime weight", (out + err, b1.get("share"), share))
    t.check('ringproxy_backend_ring_weight{backend="c1"} 3' in metrics(A), "/metrics shows the ring weight")
    rc, out, err = ctl("maint", "c4")
    t.check(rc == 0, "ctl maint c4", err)

    # ---- the state file, a reload and a restart -------------------------------
    with open(state_file) as f:
        lines = [ln.split() for ln in f if not ln.startswith("#")]
    got = {ln[0]: ln[1:3] for ln in lines}
    left = [f for f in os.listdir(os.path.dirname(state_file))
            if f.startswith(os.path.basename(state_file) + ".")]
    t.check(got == {"c1": ["ready", "3"], "c3": ["drain", "-"], "c4": ["maint", "-"]} and not left,
            "state_file holds the states other than the file's, and no temporary is left", got)
    px.reload()
    st = stats(A)
    t.check([backend(st, n).get("admin_state") for n in ("c1", "c2", "c3", "c4")] == ["ready", "ready", "drain", "maint"]
            and backend(st, "c1").get("ring_weight") == 3 and st.get("generation") == 2,
            "a reload keeps every runtime state", [backend(st, n).get("admin_state") for n in caches])
    caches["c4"].reset()
    owners(px.port, ring.keys_of("c4", 50))
    t.check(caches["c4"].stats()["requests"] == 0, "after the reload, still no request reaches c4 (maint)")
    mark = px.log_size()
    with open(path, "w") as f:
        f.write(conf(["c1", "c2", "c3"]))
    px.reload()
    t.check(px.wait_log(r"backend c4 is no longer in .*ctl\.ini: its runtime state \(maint\) is dropped", since=mark),
            "a reload that removes c4 drops its state with a log line")
    with open(state_file) as f:
        t.check("c4" not in f.read(), "... and from state_file")
    with open(path, "w") as f:
        f.write(conf(["c1", "c2", "c3", "c4"]))
    px.reload()
    t.check(backend(stats(A), "c4").get("admin_state") == "ready", "c4 added back starts ready")
    ctl("maint", "c2")
    # c1's weight 3 took some of c4's keys: the drain's are those it has
    keys4 = [k for k, v in owners(px.port, ring.keys_of("c4", 300)).items() if v == "c4"]
    t_before = time.time()
    rc, out, err = ctl("drain", "c4", "8s")
    t_drain = time.time()
    px.stop()
    px = H.Proxy(RP, path=path, tag="ctl2")
    A = px.admin_port()
    point_cli(A)
    st = stats(A)
    t.check([backend(st, n).get("admin_state") for n in ("c1", "c2", "c3", "c4")] == ["ready", "maint", "drain", "drain"]
            and backend(st, "c1").get("ring_weight") == 3,
            "a restart applies state_file: c1 weight 3, c2 maint, c3 drained, c4 draining",
            [backend(st, n).get("admin_state") for n in caches])
    t.check(px.wait_log(r"backend c4 goes on draining: \d+% of its window gone"), "the drain of c4 goes on after the restart")
    caches["c2"].reset()
    caches["c3"].reset()
    owners(px.port, ring.keys_of("c2", 50) + ring.keys_of("c3", 50))
    t.check(caches["c2"].stats()["requests"] == 0 and caches["c3"].stats()["requests"] == 0,
            "after the restart no request reaches c2 (maint) nor c3 (drained)")
    while time.time() < t_drain + 3:
        time.sleep(0.05)
    ts = time.time()
    now4 = owners(px.port, keys4)
    te = time.time()
    held = sum(1 for v in now4.values() if v == "c4") / max(1, len(keys4))
    # the drain began between t_before and t_drain, on the wall clock
    wrong = [k for k in keys4 if (u_of(k) < (ts - t_drain - 0.05) / 8 and now4[k] == "c4") or
             (u_of(k) > (te - t_before + 0.05) / 8 and now4[k] != "c4")]
    t.check(len(keys4) > 100 and 0.4 < held < 0.85 and not wrong and te < t_drain + 7,
            "after the restart the drain goes on where it was: c4 serves the keys whose moment has not come, "
            "and only those", f"{held:.2f} of {len(keys4)} held at {ts - t_drain:.1f}s of 8s; against the "
            f"schedule: {wrong[:5]}")

    # ---- a state file with values ctl would refuse -----------------------------
    px.stop()
    with open(state_file, "w") as f:
        f.write("# NAME STATE WEIGHT DRAIN_START_MS DRAIN_SPAN_MS\nc1 ready 1e300 0 0\n")
    p = subprocess.run([RP, "-t", "-c", path], capture_output=True, text=True, timeout=30)
    t.check(p.returncode == 1 and f"{state_file}:2: weight '1e300' is not a number from 0 to 1000" in p.stderr,
            "-t reads the state file: a weight of 1e300 is refused at STATE_FILE:LINE", p.stdout[-300:] + p.stderr)
    with open(state_file, "w") as f:
        f.write("c4 drain - 1700000000000 9223372036854775807\n")
    try:  # a start that takes it runs until the timeout kills it
        p = subprocess.run([RP, "-c", path], capture_output=True, text=True, timeout=15)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, err = None, "it started"
    t.check(rc and f"{state_file}:1: drain span '9223372036854775807' is not a drain's window" in err,
            "the start refuses a drain span of 2^63-1 at STATE_FILE:LINE", err[-600:])


H.run_main(t, main)
