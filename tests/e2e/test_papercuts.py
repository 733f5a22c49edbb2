#!/usr/bin/env python3
"""test_papercuts.py -- what a first switch day showed wrong in the words
ringproxy prints, each as the operator reads it: "1 backend", not "1
backends"; a quiet reload's tier line says "no requests"; a reload that
changes listen says it needs a restart instead of listing it as done; a
window cut short is said to the second ("29s", not "29874ms"); a backend a
reload added that never answered is not "up -> down"; `ctl` without -c
does not end in "nothing started"; `purge` of a path asks for the whole
URL, not for a host= it does not take; /ring?url=PATH says to add host=,
not "give url= and host="; `plan --per-key` keeps the count out of the key
column. And max_connections = 10000 under a soft limit of 1,024 with a
higher hard limit starts without a warning, the soft limit raised; under a
hard limit too low it warns.
usage: test_papercuts.py RINGPROXY TESTCACHE"""

import os
import re
import resource
import socket
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, timeout=30):
    p = subprocess.run([RP, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def words(cache):
    """The reload, ctl and start lines, the tier line and the CLI's."""
    admin = free_port()
    conf = lambda listen, extra="", ramp="0": (  # noqa: E731
        f"[proxy]\nlisten = {listen}\nworkers = 1\nadmin_listen = 127.0.0.1:{admin}\n"
        f"[ring]\nramp = {ramp}\n[cache]\nsize = 0\n"
        f"[backend c1]\nurl = http://127.0.0.1:{cache.port}\n{extra}")
    port = free_port()
    path = harness.write("papercuts.ini", conf(f"127.0.0.1:{port}"))
    px = harness.Proxy(RP, path=path, tag="papercuts")
    start = px.wait_log(r"info: listening on [^\n]*\n", 5)
    t.check(start and "with 1 worker; 1 backend," in start.group(0),
            "the start line: '1 worker; 1 backend', no plural s", start and start.group(0))
    rc, out, err = run("plan", path)
    t.check(rc == 0 and re.search(r"papercuts\.ini: 1 backend, \d+ points", out), "plan: '1 backend,'", out[:300])

    # a reload without a request since the start, and one that changes listen
    other = free_port()
    harness.write("papercuts.ini", conf(f"127.0.0.1:{other}"))
    mark = px.log_size()
    line = px.reload()
    tier = px.wait_log(r"tier miss ratio before reload 2: [^\n]*", 5, mark)
    t.check(tier and tier.group(0) == "tier miss ratio before reload 2: no requests in the minute before",
            "a quiet reload: 'tier miss ratio before reload 2: no requests'", tier and tier.group(0))
    t.check(line and f"listen 127.0.0.1:{port} -> 127.0.0.1:{other} (needs a restart: not applied)" in line,
            "a reload that changes listen says it needs a restart, not that it changed", line)
    t.check(px.get("/x")[0] == 200, "and still serves on the old address")

    # a backend a reload adds that never answers: not "up -> down"
    dead = free_port()
    harness.write("papercuts.ini", conf(f"127.0.0.1:{port}", f"[backend c9]\nurl = http://127.0.0.1:{dead}\n"
                                        "weight = 100\n"))
    mark = px.log_size()
    px.reload()
    for i in range(20):
        px.get(f"/new/{i}.jpg")
    fell = px.wait_log(r"backend c9: [^\n]*-> down[^\n]*", 5, mark)
    t.check(fell and fell.group(0).startswith("backend c9: new, never answered -> down ("),
            "a new backend that never answered falls as 'new, never answered -> down', not 'up -> down'",
            fell and fell.group(0))

    # a window cut to what a ramp in progress has left: to the second
    harness.write("papercuts.ini", conf(f"127.0.0.1:{port}", "[backend c2]\nurl = http://127.0.0.1:"
                                        f"{cache.port}\n"))
    px.reload()
    drain = urllib.request.Request(f"http://127.0.0.1:{admin}/backend?name=c2&state=drain&duration=31s",
                                   data=b"", method="POST")
    urllib.request.urlopen(drain, timeout=10).read()
    mark = px.log_size()
    maint = urllib.request.Request(f"http://127.0.0.1:{admin}/backend?name=c2&state=maint", data=b"",
                                   method="POST")
    try:
        urllib.request.urlopen(maint, timeout=10).read()
    except urllib.error.HTTPError as e:
        e.read()
    ctl = px.wait_log(r"ctl from [^:]+:\d+: maint c2: [^\n]*", 5, mark)
    cut = ctl and re.search(r"(ramping over|goes on \()(\S+?)[;)\s]", ctl.group(0) + " ")
    t.check(ctl and cut and re.fullmatch(r"(\d+m)?\d+s", cut.group(2)) and not re.search(r"\d{4,}ms", ctl.group(0)),
            "a window cut short is said to the second ('29s'), not in milliseconds", ctl and ctl.group(0))

    # /ring?url=PATH without a host
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/ring?url=/t/1.jpg&format=text",
                                  timeout=10).read().decode()
    t.check("give url= and host=" not in text and "give a full URL, or host= too" in text,
            "/ring?url=/t/1.jpg: the cache line asks for host= too, not for the url= it was given",
            [x for x in text.splitlines() if x.startswith("cache")])

    # purge of a path: the whole URL, no host= (the command takes none)
    rc, out, err = run("purge", "-c", path, "/t/1.jpg")
    t.check(rc == 1 and "host=" not in out + err and "give the whole URL, http://HOST/t/1.jpg" in err,
            "ringproxy purge /t/1.jpg asks for the whole URL, not for host=", out + err)
    px.stop()


def cli():
    """ctl without -c; plan --per-key with counts."""
    rc, out, err = run("ctl", "drain", "c1")
    if os.path.exists("/etc/ringproxy/ringproxy.ini"):
        t.skip("ctl without -c", "/etc/ringproxy/ringproxy.ini exists here")
    else:
        t.check(rc == 1 and "nothing started" not in err and "give it with -c FILE" in err,
                "ctl without -c: says to give the config with -c, not 'nothing started'", err)
    a = harness.write("pk-a.ini", "[backend c1]\nurl = http://127.0.0.1:9\n")
    b = harness.write("pk-b.ini", "[backend c1]\nurl = http://127.0.0.1:9\n[backend c2]\nurl = http://127.0.0.1:10\n")
    keys = harness.write("pk-keys.txt", "/a.jpg 12\n/b.jpg\t7\n/c.jpg\n")
    rc, out, err = run("plan", a, b, "--keys", keys, "--per-key")
    rows = [x.split("\t") for x in out.splitlines() if x.startswith("/")]
    t.check(rc == 0 and [r[0] for r in rows] == ["/a.jpg", "/b.jpg", "/c.jpg"],
            "plan --per-key: the key column holds the key, not its count", out)


def nofile():
    """A soft limit of 1,024 under a hard one that fits max_connections =
    10000: raised, no warning. A hard limit of 1,024: the warning."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cache = harness.Cache(TC, "c1")
    text = harness.conf_text([cache], proxy={"max_connections": 10000})
    if hard != resource.RLIM_INFINITY and hard < 10064:
        t.skip("the soft limit raised", f"the hard limit here is {hard}")
    else:
        px = harness.Proxy(RP, text, tag="nofile-soft", wrap=("prlimit", f"--nofile=1024:{hard}", "--"))
        limits = open(f"/proc/{px.pid}/limits").read()
        m = re.search(r"Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)", limits)
        t.check(m and m.group(1) == m.group(2) and "warn:" not in px.log() and
                re.search(r"info: file descriptors: limit \d+ \(raised from the soft limit\)", px.log()),
                f"soft 1024, hard {hard}: the soft limit is raised to the hard one, no warning",
                (m and m.group(0)) + "\n" + px.log())
        px.stop()
    px = harness.Proxy(RP, text, tag="nofile-hard", nofile=1024)
    w = px.wait_log(r"warn: max_connections = 10000 needs at least 10064 file descriptors[^\n]*", 5)
    t.check(w and "the limit is 1024, the hard limit" in w.group(0),
            "hard 1024: the warning says what it needs and that the hard limit is short", px.log())
    px.stop()
    cache.stop()


def main():
    cache = harness.Cache(TC, "c1")
    words(cache)
    cache.stop()
    cli()
    nofile()


harness.run_main(t, main)
