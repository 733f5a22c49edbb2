#!/usr/bin/env python3
"""test_cli.py -- `ringproxy -t` and `ringproxy plan` as an operator runs
them, checked against ringref.py, an independent model of the ring (and
`plan --ramp`'s expected misses against a model of the same statement).
usage: test_cli.py RINGPROXY SOURCE_ROOT"""

import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ringref  # noqa: E402

RP = sys.argv[1]
ROOT = sys.argv[2]
TMP = tempfile.mkdtemp(prefix="rp-cli-")
failures = 0
n = 0


def check(cond, what):
    global failures, n
    n += 1
    print(("ok" if cond else "not ok"), n, "-", what, flush=True)
    if not cond:
        failures += 1


SANITIZER = []  # sanitizer lines from any run's stderr, checked at the end


def run(*args, stdin=None):
    p = subprocess.run([RP, *args], capture_output=True, text=True, input=stdin, timeout=60)
    SANITIZER.extend(line for line in p.stderr.splitlines()
                     if "runtime error:" in line or "Sanitizer" in line)
    return p.returncode, p.stdout, p.stderr


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def conf(backends, vnodes=160):
    s = f"[ring]\nvnodes = {vnodes}\n"
    for name, weight, port in backends:
        s += f"\n[backend {name}]\nurl = http://127.0.0.1:{port}\nweight = {weight}\n"
    return s


demo = os.path.join(ROOT, "conf", "demo.ini")

# -t on a good file
rc, out, err = run("-t", "-c", demo)
check(rc == 0, "-t on conf/demo.ini exits 0")
check("configuration ok" in out, "-t says the configuration is ok")
ref = ringref.ring_of(demo)
for name, share in ref.shares().items():
    line = [l for l in out.splitlines() if l.strip().startswith(name + " ")]
    check(line and f"{100 * share:.3f}%" in line[0], f"-t prints {name}'s exact share {100 * share:.3f}%")

# -t on a bad file: every error with file:line, exit 1
bad = write("bad.ini", "[proxy]\nworkers = -1\n[ring]\nvnodes = x\n[backend a]\nurl = ftp://x\n")
rc, out, err = run("-t", "-c", bad)
check(rc == 1, "-t on a bad file exits 1")
check(f"{bad}:2: workers:" in err and f"{bad}:4: vnodes:" in err and f"{bad}:6: url:" in err,
      "-t prints every error as FILE:LINE")
check("3 errors; nothing started" in err, "-t sums up the errors")
rc, out, err = run("-t", "-c", os.path.join(TMP, "missing.ini"))
check(rc == 1 and "cannot open" in err, "-t on a missing file exits 1 with a reason")

# -T: the effective config, every default filled in, in a file -t accepts
# again and that dumps to the same text (a round trip)
rc, out, err = run("--help-config")
help_keys = [l.split()[0] for l in out.splitlines() if l.startswith("  ") and not l.strip().startswith("default:")]
mini = write("mini.ini", "[backend only]\nurl = http://127.0.0.1:9000\n")
for src in (demo, os.path.join(ROOT, "tests", "unit", "conf", "good-full.ini"), mini):
    name = os.path.basename(src)
    rc, dumped, err = run("-T", "-c", src)
    check(rc == 0 and dumped.startswith("; the effective configuration of"), f"-T {name} exits 0")
    keys_out = {l.lstrip("; ").split(" = ")[0] for l in dumped.splitlines() if " = " in l}
    check(set(help_keys) <= keys_out, f"-T {name}: every key of --help-config is written "
          f"(missing: {sorted(set(help_keys) - keys_out)})")
    again = write("again-" + name, dumped)
    rc, out, err = run("-t", "-c", again)
    check(rc == 0 and "configuration ok" in out, f"-t accepts what -T {name} wrote")
    rc, dumped2, err = run("-T", "-c", again)
    # the same, but that every key is now set in the file: no "; default"
    check(dumped2.splitlines()[1:] == dumped.replace("   ; default", "").splitlines()[1:],
          f"-T of the dump of {name} is the same dump (every key now set)")
    rc1, j1, _ = run("plan", src, "--json")
    rc2, j2, _ = run("plan", again, "--json")
    check(rc1 == rc2 == 0 and json.loads(j1) == json.loads(j2), f"{name} and its dump make the same ring")
rc, dumped, err = run("-T", "-c", mini)
check("connect_timeout = 1s   ; default" in dumped and "url = http://127.0.0.1:9000\n" in dumped and
      "; health_interval = 2s   (as in [health])" in dumped,
      "-T fills in defaults and says so; unset health overrides follow [health] as comments")
rc, out, err = run("-T", "-c", bad)
check(rc == 1 and f"{bad}:2: workers:" in err and out == "", "-T on a bad file prints its errors, exits 1")

# plan, one file, JSON: exact shares and points as the model computes them
a = write("a.ini", conf([("c1", 1, 9001), ("c2", 1, 9002), ("c3", 2, 9003)], vnodes=100))
rc, out, err = run("plan", a, "--json")
check(rc == 0, "plan one file exits 0")
doc = json.loads(out)
ra = ringref.ring_of(a)
sh = ra.shares()
check([b["name"] for b in doc["backends"]] == ["c1", "c2", "c3"], "backends in file order")
check(all(abs(b["share"] - sh[b["name"]]) < 1e-12 for b in doc["backends"]), "shares equal the model's exact arcs")
check([b["points"] for b in doc["backends"]] == [100, 100, 200], "points = round(vnodes x weight)")
check(abs(sum(b["share"] for b in doc["backends"]) - 1) < 1e-12, "shares sum to 1")
check("compare" not in doc and "keys" not in doc, "no compare/keys without a second file or --keys")

# keys: counts per backend, \r\n tolerated
keys = [f"/thumbs/{i % 977}/{i}_200x200.jpg?v={i % 7}" for i in range(20000)]
kf = write("keys.txt", "\n".join(keys) + "\n")
kf_crlf = write("keys-crlf.txt", "\r\n".join(keys) + "\r\n")
rc, out, err = run("plan", a, "--keys", kf, "--json")
doc = json.loads(out)
want = {n: 0 for n in ra.names}
for k in keys:
    want[ra.lookup(k.encode())] += 1
check(doc["keys"] == len(keys), "keys counted")
check({b["name"]: b["keys"] for b in doc["backends"]} == want, "keys per backend equal the model's lookups")
rc, out2, err = run("plan", a, "--keys", kf_crlf, "--json")
check(json.loads(out2) == doc, "a CRLF key file gives the same counts")

# plan, two files: added backend; keys move only to it
b = write("b.ini", conf([("c1", 1, 9001), ("c2", 1, 9002), ("c3", 2, 9003), ("c4", 1, 9004)], vnodes=100))
rc, out, err = run("plan", a, b, "--keys", kf, "--json")
check(rc == 0, "plan two files exits 0")
doc = json.loads(out)
rb = ringref.ring_of(b)
cmp = doc["compare"]
check(cmp["added"] == ["c4"] and cmp["removed"] == [] and cmp["changed"] == [], "added/removed/changed")
check(abs(cmp["moved_share"] - rb.shares()["c4"]) < 1e-12, "moved share = the new backend's exact share")
moved = sum(1 for k in keys if ra.lookup(k.encode()) != rb.lookup(k.encode()))
check(cmp["moved_keys"] == moved, f"moved keys = the model's count ({moved})")
check(all(f["to"] == "c4" for f in cmp["flows"]), "every flow goes to the added backend")
check(sum(f["keys"] for f in cmp["flows"]) == moved, "flow key counts add up")
check(abs(sum(f["share"] for f in cmp["flows"]) - cmp["moved_share"]) < 1e-12, "flow shares add up")
check(cmp["flows"] == sorted(cmp["flows"], key=lambda f: -f["share"]), "flows largest first")

# human output of the same
rc, out, err = run("plan", a, b)
check("added:   c4" in out and f"{100 * cmp['moved_share']:.3f}% of the keyspace" in out,
      "text output names the added backend and the moved share")

# removal and reweighting
c = write("c.ini", conf([("c1", 1, 9001), ("c3", 3, 9003)], vnodes=100))
rc, out, err = run("plan", a, c, "--json")
doc = json.loads(out)["compare"]
check(doc["removed"] == ["c2"] and doc["changed"] == ["c3"], "removed and reweighted are reported")
check(all(f["from"] in ("c2", "c3") or f["to"] in ("c2", "c3") for f in doc["flows"]),
      "keys move only from the removed or to/from the reweighted backend")

# a new URL for the same name moves nothing
d = write("d.ini", conf([("c1", 1, 9101), ("c2", 1, 9002), ("c3", 2, 9003)], vnodes=100))
rc, out, err = run("plan", a, d, "--json")
doc = json.loads(out)["compare"]
check(doc["moved_share"] == 0 and doc["flows"] == [] and doc["changed"] == ["c1"],
      "changing a URL moves no key (identity is the name)")
rc, out, err = run("plan", a, d)
check("no key moves" in out, "text output says a URL change moves no key")

# bounded-load simulation: nobody over ceil(c * K * w / W)
rc, out, err = run("plan", a, "--keys", kf, "--balance-factor", "1.05", "--json")
doc = json.loads(out)
W = sum(ra.weights.values())
caps = {n: math.ceil(1.05 * len(keys) * ra.weights[n] / W) for n in ra.names}
check(all(bk["keys"] <= caps[bk["name"]] for bk in doc["backends"]), "--balance-factor caps every backend")
check(sum(bk["keys"] for bk in doc["backends"]) == len(keys), "--balance-factor keeps every key")
# the model of the simulation: keys in file order, walk to the next with room
cnt = {n: 0 for n in ra.names}
for k in keys:
    for cand in ra.walk(k.encode()):
        if cnt[cand] < caps[cand]:
            cnt[cand] += 1
            break
check({bk["name"]: bk["keys"] for bk in doc["backends"]} == cnt, "--balance-factor equals the model's simulation")
rc, out, err = run("plan", a, "--keys", kf, "--balance-factor", "1.05")
check(rc == 0 and "every key bounded" in out and "under even load it moves no key" in out,
      "--balance-factor says which rule it simulates")
hot = write("hot.txt", "".join("/hot.jpg\n" if i % 4 == 0 else f"/t/{i}.jpg\n" for i in range(20000)))
rc, out, err = run("plan", a, b, "--keys", hot, "--balance-factor", "1.25", "--json")
cmp = json.loads(out)["compare"]
check(rc == 0 and sum(f["keys"] for f in cmp["flows"]) == cmp["moved_keys"] and
      any(f["share"] == 0 and f["keys"] > 0 for f in cmp["flows"]),
      "with the load caps, every moved key is in a flow, those the caps moved with share 0")

# two backends with one url (a copy-paste mistake): -t warns, naming both
twins = write("twins.ini", conf([("c1", 1, 9001), ("c2", 1, 9002), ("c3", 1, 9001)]))
rc, out, err = run("-t", "-c", twins)
check(rc == 0 and f"warning: {twins}:13: backends c1 and c3 have the same url http://127.0.0.1:9001 (line 5)"
      in err and "(1 warning)" in out,
      "-t: two backends with the same url warn, naming both and both lines")
rc, out, err = run("-t", "-c", write("untwinned.ini", conf([("c1", 1, 9001), ("c2", 1, 9002)])))
check(rc == 0 and "same url" not in err, "-t: backends with their own urls: no such warning")
vhosts = write("vhosts.ini", conf([("c1", 1, 9001), ("c3", 1, 9001)]).replace(
    "[backend c3]\n", "[backend c3]\nhost = other.example\n"))
rc, out, err = run("-t", "-c", vhosts)
check(rc == 0 and "same url" not in err, "-t: one url under two [backend] hosts (two keyspaces of one cache): no warning")

# a rename (same url, new name): plan says so; all of its keys move, at once
ren = write("renamed.ini", conf([("c1", 1, 9001), ("thumbs-2", 1, 9002), ("c3", 1, 9003)]))
orig = write("orig.ini", conf([("c1", 1, 9001), ("c2", 1, 9002), ("c3", 1, 9003)]))
rc, out, err = run("plan", orig, ren)
check(rc == 0 and "renamed: c2 -> thumbs-2 (url http://127.0.0.1:9002): a rename moves all of c2's keys and is "
      "not ramped" in out, "plan: a backend under a new name at the same url is a rename, said with what it costs")
rkeys = write("renkeys.txt", "".join(f"/r/{i}.jpg 5\n" for i in range(2000)))
rc, out, err = run("plan", orig, ren, "--keys", rkeys, "--ramp", "10m", "--json")
cmp_ = json.loads(out)["compare"] if rc == 0 else {}
rref = ringref.ring_of(orig)
c2keys = sum(1 for i in range(2000) if rref.lookup(f"/r/{i}.jpg".encode()) == "c2")
check(rc == 0 and cmp_["renamed"] == [{"from": "c2", "to": "thumbs-2", "url": "http://127.0.0.1:9002"}] and
      cmp_["ramp"]["moved_keys"] == cmp_["moved_keys"] and
      cmp_["ramp"]["moved_keys"] - cmp_["ramp"]["ramped_keys"] == c2keys > 0,
      f"plan --json: the rename listed; all {c2keys} of c2's keys move at once, not held back by the ramp "
      f"({cmp_.get('moved_keys')} moved in all)")
rc, out, err = run("plan", orig, write("moved.ini", conf([("c1", 1, 9001), ("c2", 1, 9012), ("c3", 1, 9003)])))
check(rc == 0 and "renamed:" not in out, "plan: a new url under the same name is no rename")

# --keys under [ring] key: each line keyed as the proxy keys a request
def conf_key(mode, backends, vnodes=160):
    return conf(backends, vnodes).replace("[ring]\n", f"[ring]\nkey = {mode}\n", 1)


three = [("c1", 1, 9001), ("c2", 1, 9002), ("c3", 1, 9003)]
pa = write("path.ini", conf_key("path", three))
pq = write("pq.ini", conf_key("path+query", three))
ps = write("ps.ini", conf_key("path+sorted-query", three))
rk = ringref.ring_of(pa)
lines = [f"/img/{i}.jpg?w={i % 5}&h={i % 3}" for i in range(3000)] + \
        [f"http://img.example/abs/{i}.jpg?z=1" for i in range(50)]
qf = write("qkeys.txt", "\n".join(lines) + "\n\n")


def path_of(line):
    return "/" + line.split("/", 3)[3].split("?")[0] if line.startswith("http") else line.split("?")[0]


def sorted_of(line):
    p = path_of(line)
    q = line.split("?", 1)[1] if "?" in line else ""
    ps_ = sorted(x for x in q.split("&") if x)
    return p + ("?" + "&".join(ps_) if ps_ else "")


rc, out, err = run("plan", pa, "--keys", qf, "--json")
doc = json.loads(out) if rc == 0 else {}
want = {nm: 0 for nm in rk.names}
for line in lines:
    want[rk.lookup(path_of(line).encode())] += 1
check(rc == 0 and doc["keys"] == len(lines) and {bk["name"]: bk["keys"] for bk in doc["backends"]} == want,
      "key = path: --keys counts each line by its path, as the proxy routes it (the empty line skipped)")
rc, out, err = run("plan", pa, "--keys", qf, "--raw-keys", "--json")
raw = {nm: 0 for nm in rk.names}
for line in lines + [""]:
    raw[rk.lookup(line.encode())] += 1
check(rc == 0 and {bk["name"]: bk["keys"] for bk in json.loads(out)["backends"]} == raw,
      "--raw-keys: lines hashed as written, as before")
rc, out, err = run("plan", pa, "--keys", qf, "--per-key")
rows = [r.split("\t") for r in out.splitlines()]
check(rc == 0 and len(rows) == len(lines) and all(r == [ln, rk.lookup(path_of(ln).encode())]
                                                   for r, ln in zip(rows, lines)),
      "--per-key: each key and its owner, tab-separated, in file order")
rc, out, err = run("plan", pa, ps, "--keys", qf, "--per-key", "--json")
rows = [json.loads(r) for r in out.splitlines()]
ok = len(rows) == len(lines)
for r, ln in zip(rows, lines):
    old, new = rk.lookup(path_of(ln).encode()), rk.lookup(sorted_of(ln).encode())
    ok = ok and r == {"key": ln, "old": old, "new": new, "moved": old != new}
check(rc == 0 and ok, "--per-key with two files keyed differently (path -> path+sorted-query): "
      "old and new owner of each key, JSON lines")
rc, out, err = run("plan", pq, ps, "--keys", qf)
check(rc == 0 and "moved:" in out, "two files that only key differently: plan says what moves")
bad_keys = write("badkeys.txt", "/ok.jpg\nimg/no-slash.jpg\n")
rc, out, err = run("plan", pa, "--keys", bad_keys)
check(rc == 1 and f"{bad_keys}:2: 'img/no-slash.jpg' is not a request target" in err and "--raw-keys" in err,
      "a line that is not a request target: FILE:LINE, and --raw-keys named", )
rc, out, err = run("plan", pa, "--keys", bad_keys, "--raw-keys")
check(rc == 0, "--raw-keys takes it as written")
rc, out, err = run("plan", pa, "--per-key")
check(rc == 2 and "--keys" in err, "--per-key without --keys is a usage error")
# --ramp: expected origin misses per minute for the moved keys, against a
# model of the same statement (each moved key misses once, at its first
# request after it switches; requests a Poisson stream; a key switches at
# ramp * u, u from MD5 bytes 8..15, or at once when its owner left)
counted = [(f"/z/{i}.jpg", max(0, int(30000 / (i + 1))) if i % 97 else 0) for i in range(4000)]
kc = write("counted.txt", "".join(f"{k} {c}\n" for k, c in counted))
rb_c = write("bc.ini", conf([("c1", 1, 9001), ("c3", 2, 9003), ("c4", 1, 9004)], vnodes=100))
rbc = ringref.ring_of(rb_c)
rc, out, err = run("plan", a, rb_c, "--keys", kc, "--ramp", "5m", "--period", "1h", "--json")
rmp = json.loads(out)["compare"]["ramp"] if rc == 0 else {}
off, on = [0.0] * 10, [0.0] * 10
nmoved = nramped = 0
for k, c in counted:
    o, nw = ra.lookup(k.encode()), rbc.lookup(k.encode())
    if o == nw:
        continue
    nmoved += 1
    at = 0.0
    if o in rbc.names:
        nramped += 1
        u = int.from_bytes(hashlib.md5(k.encode()).digest()[8:16], "big")
        at = (u * 300000 >> 64) / 60000.0
    rate = c / 60.0
    for col, s0 in ((off, 0.0), (on, at)):
        seen = 0.0
        for m in range(int(s0), 10):
            upto = 1 - math.exp(-rate * (m + 1 - s0))
            col[m] += upto - seen
            seen = upto
check(rc == 0 and rmp["moved_keys"] == nmoved and rmp["ramped_keys"] == nramped and nramped < nmoved and
      rmp["seconds"] == 300 and rmp["period_seconds"] == 3600 and len(rmp["minutes"]) == 10,
      f"plan --ramp: {nmoved} moved keys, {nramped} held back (those of the removed c2 move at once)")
check(rmp and all(abs(r["off"] - off[i]) < 1e-6 and abs(r["on"] - on[i]) < 1e-6
                  for i, r in enumerate(rmp["minutes"])),
      "plan --ramp: misses per minute without and with the ramp equal the model's")
check(rmp and rmp["total"] == sum(1 for k, c in counted if c and ra.lookup(k.encode()) != rbc.lookup(k.encode())),
      "plan --ramp: in all, one miss per moved key ever requested")
rc, out, err = run("plan", a, rb_c, "--keys", kc, "--ramp", "5m", "--period", "1h")
check(rc == 0 and "warm ramp over 5m" in out and "no ramp" in out and "ramp 5m" in out and
      out.rstrip().splitlines()[-1].split()[0] == "total", "plan --ramp prints the table")
rc, out, err = run("plan", a, "--keys", kc, "--ramp", "5m")
check(rc == 2 and "--ramp" in err, "--ramp needs two files")
# a scheme change: the new file keys the list its own way, and the ramp
# counts the keys that move on the new file's positions, as the key table does
rb_n = write("bc-nginx.ini", "[ring]\nscheme = nginx\n" + conf([("c1", 1, 9001), ("c3", 2, 9003),
                                                                  ("c4", 1, 9004)]).split("\n", 2)[2])
rc, out, err = run("plan", a, rb_n, "--keys", kc, "--ramp", "5m", "--period", "1h", "--json")
cmp_ = json.loads(out)["compare"] if rc == 0 else {}
check(rc == 0 and cmp_["ramp"]["moved_keys"] == cmp_["moved_keys"] > 0,
      "plan --ramp across a scheme change (ringproxy -> nginx): the ramp's moved keys are the key table's "
      "(%s and %s)" % (cmp_.get("ramp", {}).get("moved_keys"), cmp_.get("moved_keys")))
import re  # noqa: E402
rc, out, err = run("plan", a, rb_n, "--keys", kc, "--ramp", "5m", "--period", "1h")
m_tab = re.search(r"moved:.*?, (\d+) of \d+ keys", out)
m_ramp = re.search(r"warm ramp over 5m: (\d+) moved keys", out)
check(rc == 0 and m_tab and m_ramp and m_tab.group(1) == m_ramp.group(1),
      "plan --ramp's text across a scheme change: both sections say the same number of moved keys (%s, %s)"
      % (m_tab and m_tab.group(1), m_ramp and m_ramp.group(1)))
rc, out, err = run("plan", a, rb_c, "--ramp", "5m")
check(rc == 2 and "--keys" in err, "--ramp needs --keys")
rc, out, err = run("plan", a, rb_c, "--keys", kc, "--ramp", "soon")
check(rc == 2 and "duration" in err, "--ramp takes a duration")

# usage errors
rc, out, err = run("plan")
check(rc == 2, "plan without a file is a usage error")
rc, out, err = run("plan", a, "--balance-factor", "0.5", "--keys", kf)
check(rc == 2 and "balance-factor" in err, "a balance factor below 1 is refused")
rc, out, err = run("plan", a, b, a)
check(rc == 2, "three files are refused")
rc, out, err = run("plan", a, bad)
check(rc == 1 and f"{bad}:2:" in err, "plan on a bad file prints its errors, exits 1")
rc, out, err = run("--version")
check(rc == 0 and out.startswith("ringproxy "), "--version")
rc2, out2, err2 = run("-V")
check(rc2 == 0 and out2 == out, "-V prints what --version prints")
lines = {l.split()[0].lower(): l for l in out.splitlines() if l.strip()}
check(all(k in lines for k in ("libevent", "openssl", "libcurl", "inih")),
      "--version names libevent, OpenSSL, libcurl and inih")


def pkgver(name):
    """The version pkg-config reports for name, None without pkg-config."""
    try:
        p = subprocess.run(["pkg-config", "--modversion", name], capture_output=True, text=True)
    except OSError:
        return None
    return p.stdout.strip() if p.returncode == 0 else None


# the libraries on this machine are the ones the binary runs with
for lib, pc, fmt in (("libevent", "libevent", "libevent {}"), ("openssl", "libcrypto", "OpenSSL {} "),
                     ("libcurl", "libcurl", "libcurl {}"), ("inih", "inih", "inih {} ")):
    v = pkgver(pc)
    if v is None:
        check(True, f"# SKIP no pkg-config version of {pc}")
    else:
        check(lines.get(lib, "").startswith(fmt.format(v)), f"--version: {lines.get(lib)!r} is {pc} {v}")
rc, out, err = run("--help-config")
check(rc == 0 and "balance_factor" in out and "default: 1.25" in out, "--help-config lists keys with defaults")

# balance_factor: 0 (off) or 1 to 100, as the reference says; below 1 the
# caps add up to less than the load
for bf, ok in (("0.5", False), ("0.999", False), ("0", True), ("1", True), ("1.25", True)):
    path = write(f"bf-{bf}.ini", f"[ring]\nbalance_factor = {bf}\n\n[backend a]\nurl = http://127.0.0.1:9\n")
    rc, out, err = run("-t", "-c", path)
    if ok:
        check(rc == 0, f"balance_factor = {bf} is accepted {err!r}")
    else:
        check(rc == 1 and f"{path}:2: balance_factor: {bf} is below 1" in err and
              "expected 0 (off), or a number from 1 to 100" in err,
              f"balance_factor = {bf} is refused as FILE:LINE, naming what it takes {err!r}")

# The demo and the README's Install, as a new operator runs them in turn:
# the release build must not land in the demo's build directory (meson setup
# on a configured directory keeps its buildtype and exits 0), and the demo's
# plan example is about the demo's own tier.
import re  # noqa: E402
demo_sh = open(os.path.join(ROOT, "tests", "demo.sh")).read()
readme = open(os.path.join(ROOT, "README.md")).read()
quick = readme[readme.index("## Install"):readme.index("\n## ", readme.index("## Install") + 1)]
demo_dirs = set(re.findall(r"meson setup (\S+)", demo_sh)) | set(re.findall(r"ninja -C (\S+)", demo_sh))
rel = re.search(r"meson setup (\S+) -Dbuildtype=release && ninja -C (\S+)", quick)
inst = re.search(r"meson install -C (\S+)", quick)
check(rel and inst and rel.group(1) == rel.group(2) == inst.group(1) and rel.group(1) not in demo_dirs,
      f"the README's Install builds and installs the release in a directory the demo does not configure "
      f"(demo {sorted(demo_dirs)}, release {rel.groups() if rel else None}, install {inst.group(1) if inst else None})")
# run after .ci/run, build/ holds the cache suite's package only
# (tests/cachetests/run.sh): a guard on the directory would skip the setup
# and ninja would find no build.ninja
guards = re.findall(r"\[ (-[df]) (\S+) \] \|\| meson setup (\S+)", demo_sh)
check(guards and all(k == "-f" and f == d + "/build.ninja" for k, f, d in guards),
      f"the demo configures its build directory unless build.ninja is there, not merely the directory: {guards}")
# the demo says what it is doing before its build, the longest silence
say = re.search(r'^echo "building[^"]*\(about a minute[^"]*\)"$', demo_sh, re.M)
build = re.search(r"^ninja -C ", demo_sh, re.M)
check(say and build and say.start() < build.start(),
      "the demo says 'building ... (about a minute ...)' before it builds")
# the README's first two commands: the test run says how long it takes
top = readme[:readme.index("\n```\n", readme.index("```sh")) + 1]
check(re.search(r"^bash tests/demo\.sh +# ", top, re.M) and
      re.search(r"^bash \.ci/run +# .*\(about 15-20 minutes\)$", top, re.M),
      "the README's two commands: the demo, and the whole test suite with its duration")
plan = re.search(r"ringproxy plan (\S+) (\S+)", demo_sh)
started = re.search(r"ringproxy -c (\S+) &", demo_sh)
if plan and started:
    rc, out, err = run("plan", os.path.join(ROOT, plan.group(1)), os.path.join(ROOT, plan.group(2)))
check(plan and started and plan.group(1) == started.group(1) and rc == 0 and
      re.search(r"added: +cache-4\n", out) and re.search(r"removed: +\(none\)", out),
      f"the demo's plan example grows the demo's own tier ({started.group(1) if started else None}) "
      f"by cache-4: {plan.groups() if plan else None}")

# The demo's Ctrl-C: the terminal sends SIGINT to its foreground process
# group; run the demo's own stop() and ringproxy line in a group of their
# own and do the same. One signal must reach ringproxy, or it logs
# "second Terminated: stopping now" on every normal stop.
import signal  # noqa: E402
import time  # noqa: E402
stop_fn = re.search(r"^stop\(\) \{\n.*?^\}\n", demo_sh, re.M | re.S)
start_line = re.search(r"^.*\./build/src/ringproxy -c conf/demo\.ini &$", demo_sh, re.M)
if stop_fn and start_line:
    ctrl_conf = write("ctrl-c.ini", "[proxy]\nlisten = 127.0.0.1:0\nworkers = 1\n\n[backend a]\nurl = http://127.0.0.1:9\n")
    script = ("pids=()\n" + stop_fn.group(0) + "trap stop INT TERM EXIT\n" +
              start_line.group(0).replace("./build/src/ringproxy", RP).replace("conf/demo.ini", ctrl_conf) +
              "\npids+=($!)\nwait\n")
    log_path = os.path.join(TMP, "ctrl-c.log")
    with open(log_path, "w") as log:
        demo_p = subprocess.Popen(["bash", "-c", script], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "listening on" not in open(log_path).read():
        time.sleep(0.05)
    os.killpg(demo_p.pid, signal.SIGINT)    # the terminal's Ctrl-C: the whole foreground group
    try:
        demo_p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(demo_p.pid, signal.SIGKILL)
        demo_p.wait(timeout=10)
    ctrl_log = open(log_path).read()
check(stop_fn and start_line and "stopping on" in ctrl_log and "stopped" in ctrl_log and
      "second" not in ctrl_log,
      f"Ctrl-C in the demo stops ringproxy with one signal, no 'second ...: stopping now': "
      f"{ctrl_log[-600:] if stop_fn and start_line else 'no stop() or ringproxy line in demo.sh'!r}")

# plan lists every changed setting, marking those only a restart applies
sa = write("set-a.ini", "[proxy]\nlisten = 127.0.0.1:8080\nadmin_token = old-secret\n[health]\npath = /h\n"
           "[backend c1]\nurl = http://127.0.0.1:9001\n[backend c2]\nurl = http://127.0.0.1:9002\n")
sb = write("set-b.ini", "[proxy]\nlisten = 127.0.0.1:8081\nworkers = 3\nadmin_token = new-secret\n"
           "[health]\npath = /h\ninterval = 1s\n[backend c1]\nurl = http://127.0.0.1:9001\nmax_inflight = 5\n"
           "[backend c2]\nurl = http://127.0.0.1:9002\n")
rc, out, err = run("plan", sa, sb)
want = ["  settings: [proxy] listen 127.0.0.1:8080 -> 127.0.0.1:8081 (needs a restart)",
        "            [proxy] admin_token changed",
        "            [proxy] workers 0 -> 3 (needs a restart)",
        "            [health] interval 2s -> 1s",
        "            [backend c1] max_inflight 0 -> 5"]
got = [ln for ln in out.splitlines() if ln.startswith("  settings:") or ln.startswith("            [")]
check(rc == 0 and got == want and "new-secret" not in out,
      f"plan: each changed setting old -> new, listen and workers marked (needs a restart), no secret: {got!r}")
rc, out, err = run("plan", sa, sb, "--json")
sets = json.loads(out)["compare"].get("settings", []) if rc == 0 else []
check([(x["section"], x["key"], x["old"], x["new"], x["restart"]) for x in sets] ==
      [("proxy", "listen", "127.0.0.1:8080", "127.0.0.1:8081", True), ("proxy", "admin_token", None, None, False),
       ("proxy", "workers", "0", "3", True), ("health", "interval", "2s", "1s", False),
       ("backend c1", "max_inflight", "0", "5", False)], f"plan --json: the same settings: {sets!r}")
rc, out, err = run("plan", sa, sa)
check(rc == 0 and "  settings: (none)" in out, "plan: the same file twice: settings (none)")

# plan --probe: the backends NEW.ini brings, each asked at its health path
import http.server  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/h" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


hsrv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
threading.Thread(target=hsrv.serve_forever, daemon=True).start()
with socket.socket() as dead_sock:
    dead_sock.bind(("127.0.0.1", 0))
    dead = dead_sock.getsockname()[1]
base = "[health]\npath = /h\ntimeout = 500ms\n[backend c1]\nurl = http://127.0.0.1:9001\n"
pa = write("probe-a.ini", base)
pgood = write("probe-good.ini", base + f"[backend live]\nurl = http://127.0.0.1:{hsrv.server_port}\n")
pbad = write("probe-bad.ini", base + f"[backend live]\nurl = http://127.0.0.1:{hsrv.server_port}\n"
             f"[backend gone]\nurl = http://127.0.0.1:{dead}\n")
rc, out, err = run("plan", pa, pgood, "--probe")
rows = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ") and "http://" in ln}
check(rc == 0 and "200 ok" in rows.get("live", "") and "c1" not in rows,
      f"plan --probe: the new backend answers 200 at its health path; the kept one is not probed (exit {rc}): {out[-600:]!r}")
rc, out, err = run("plan", pa, pbad, "--probe")
rows = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ") and "http://" in ln}
check(rc == 4 and "unreachable" in rows.get("gone", "") and "200 ok" in rows.get("live", ""),
      f"plan --probe: a new backend on a dead port: 'unreachable', exit 4 (exit {rc}): {out[-600:]!r}")
rc, out, err = run("plan", pa, pa, "--probe")
check(rc == 0 and "nothing to probe" in out, "plan --probe with no new backend: says so, exit 0")
hsrv.shutdown()

for line in SANITIZER[:20]:
    print("#", line)
check(not SANITIZER, "no sanitizer report in any ringproxy run's stderr")

print(f"1..{n}")
sys.exit(1 if failures else 0)
