#!/usr/bin/env python3
"""varnish-spill.py -- the driver of tests/bench/varnish-spill.sh (read its
header for what is measured and the knobs, which come from the
environment). Starts an origin testcache, four varnishd and ringproxy on
127.0.0.1 for each build in turn, warms the caches, runs wrk and prints
the table. Every process it starts is stopped by its PID (varnishd by its
process group), also when a step fails."""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

from benchproc import PROCS, get, origin_vcl, start, start_origin, start_varnish, stop_from, wait_log, warm

SECS, CLIENTS = int(os.environ["SECS"]), int(os.environ["CLIENTS"])
KEYS, ZIPF, DELAY = int(os.environ["KEYS"]), float(os.environ["ZIPF"]), int(os.environ["DELAY"])
WARM_SECS, WORKERS = int(os.environ["WARM_SECS"]), int(os.environ["WORKERS"])


def conf(ports):
    # the proxy's own cache off: every request goes to a Varnish; the
    # default balance_factor (1.25)
    s = f"[proxy]\nlisten = 127.0.0.1:0\nadmin_listen = 127.0.0.1:0\nworkers = {WORKERS}\nlog_level = info\n"
    s += "[cache]\nsize = 0\n[ring]\nvnodes = 160\n[health]\npath = /health\ninterval = 1s\n"
    for n, p in ports.items():
        s += f"[backend {n}]\nurl = http://127.0.0.1:{p}\n"
    return s


def counts(admin):
    b = json.loads(get(admin, "/stats")[1])["backends"]
    return (sum(x["requests"] for x in b), sum(x["spilled_in"] for x in b),
            sum(x.get("spilled_hot", 0) for x in b))


def wrk(port, secs, lua):
    out = subprocess.run(["wrk", "-t2", f"-c{CLIENTS}", f"-d{secs}s", "--timeout", "5s", "-s", lua,
                          f"http://127.0.0.1:{port}/", "--", "zipf", str(KEYS), str(ZIPF), "/z/"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=secs + 60)
    return out.stdout


def run(label, binary, args, origin, vcl_text):
    tmp = os.path.join(args.tmp, label)
    os.makedirs(tmp, exist_ok=True)
    mark = len(PROCS)
    try:
        ports = {f"thumbs-{i}": start_varnish(f"thumbs-{i}", vcl_text, tmp, "malloc,128m") for i in range(1, 5)}
        cfg = os.path.join(tmp, "ringproxy.ini")
        with open(cfg, "w") as f:
            f.write(conf(ports))
        log = os.path.join(tmp, "ringproxy.log")
        start([binary, "-c", cfg], log)
        port = int(wait_log(log, r"listening on 127\.0\.0\.1:(\d+)", 20).group(1))
        admin = int(wait_log(log, r"stats on http://127\.0\.0\.1:(\d+)/", 20).group(1))
        t0 = time.monotonic()
        warm(port, KEYS)
        if WARM_SECS:
            wrk(port, WARM_SECS, args.lua)
        warm_s = time.monotonic() - t0
        o0 = json.loads(get(origin, "/__stats")[1])
        r0, s0, h0 = counts(admin)
        out = wrk(port, SECS, args.lua)
        o1 = json.loads(get(origin, "/__stats")[1])
        r1, s1, h1 = counts(admin)
    finally:
        stop_from(mark)
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.findall(r"(Non-2xx or 3xx responses: \d+|Socket errors: [^\n]*)", out)
    return {"label": label, "rps": rps, "total": total, "fetches": o1["prefix_requests"] - o0["prefix_requests"],
            "requests": r1 - r0, "spilled": s1 - s0, "hot": h1 - h0, "errors": "; ".join(errors) or "none",
            "warm_s": warm_s}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    for a in ("testcache", "tmp", "vcl", "lua"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--build", action="append", required=True, help="LABEL=RINGPROXY, in run order")
    args = ap.parse_args()
    results = []
    try:
        origin = start_origin(args.testcache, args.tmp, DELAY)
        vcl_text = origin_vcl(args.vcl, origin)
        for b in args.build:
            label, binary = b.split("=", 1)
            r = run(label, binary, args, origin, vcl_text)
            print(f"# {label}: {r}", flush=True)
            results.append(r)
    finally:
        stop_from(0)
    print()
    print(f"Zipf s = {ZIPF:g} over {KEYS} URLs; 4 Varnish 7.1 (malloc,128m) in front of one origin "
          f"(testcache, {DELAY} ms a fetch); each run: fresh caches warmed with every URL once "
          f"(4 clients){f' and {WARM_SECS} s of the load' if WARM_SECS else ''}, then wrk -t2 -c{CLIENTS} "
          f"for {SECS} s; ringproxy workers = {WORKERS}, its cache off, balance_factor 1.25 (default)")
    print()
    print("| rule | origin fetches in the steady load | per 1,000 requests | requests to a non-owner "
          "| of them hot | req/s | errors |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in results:
        share = 100.0 * r["spilled"] / r["requests"] if r["requests"] else 0
        per = 1000.0 * r["fetches"] / r["total"] if r["total"] else 0
        print(f"| {r['label']} | {r['fetches']:,} | {per:.2f} | {r['spilled']:,} of {r['requests']:,} "
              f"({share:.2f}%) | {r['hot']:,} | {r['rps']:.0f} | {r['errors']} |")


if __name__ == "__main__":
    main()
