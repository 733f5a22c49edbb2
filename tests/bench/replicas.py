#!/usr/bin/env python3
"""replicas.py -- the driver of tests/bench/replicas.sh (read its header
for what is measured and the knobs, which come from the environment). For
each [ring] replicas R in turn: an origin testcache counting its fetches,
four varnishd and ringproxy (varnish-spill.py's config with replicas = R),
the caches warmed, SECS of steady Zipf load, then kill -9 of one varnishd
and SECS more of the load. Every process it starts is stopped by its PID
(varnishd by its process group), also when a step fails."""

import argparse
import importlib.util
import json
import os
import re
import signal
import sys
import threading

from benchproc import PROCS, get, start, start_origin, start_varnish, stop_from, varnish_vcl, wait_log, warm

_spec = importlib.util.spec_from_file_location(
    "varnish_spill", os.path.join(os.path.dirname(os.path.abspath(__file__)), "varnish-spill.py"))
vs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vs)


def fetches(origin):
    return json.loads(get(origin, "/__stats")[1])["prefix_requests"]


def load(port, secs, lua, out):
    """wrk for secs in a thread, its parsed result in out."""
    def run():
        o = vs.wrk(port, secs, lua)
        out["total"] = int(re.search(r"(\d+) requests in", o).group(1))
        out["errors"] = "; ".join(re.findall(r"(Non-2xx or 3xx responses: \d+|Socket errors: [^\n]*)", o)) or "none"
    t = threading.Thread(target=run)
    t.start()
    return t


def run(r, args, origin, vcl_text):
    tmp = os.path.join(args.tmp, f"r{r}")
    os.makedirs(tmp, exist_ok=True)
    mark = len(PROCS)
    try:
        ports, groups = {}, {}
        for i in range(1, 5):
            ports[f"thumbs-{i}"] = start_varnish(f"thumbs-{i}", vcl_text, tmp, "malloc,128m")
            groups[f"thumbs-{i}"] = PROCS[-1][0]
        cfg = os.path.join(tmp, "ringproxy.ini")
        with open(cfg, "w") as f:
            f.write(vs.conf(ports).replace("[ring]\n", f"[ring]\nreplicas = {r}\n"))
        log = os.path.join(tmp, "ringproxy.log")
        start([args.ringproxy, "-c", cfg], log)
        port = int(wait_log(log, r"listening on 127\.0\.0\.1:(\d+)", 20).group(1))
        warm(port, vs.KEYS)
        if vs.WARM_SECS:
            vs.wrk(port, vs.WARM_SECS, args.lua)
        steady, killed = {}, {}
        f0 = fetches(origin)
        load(port, vs.SECS, args.lua, steady).join()
        f1 = fetches(origin)
        # the busiest cache dies at the start of the next window
        th = load(port, vs.SECS, args.lua, killed)
        os.killpg(groups["thumbs-1"].pid, signal.SIGKILL)
        groups["thumbs-1"].wait(timeout=10)
        th.join()
        f2 = fetches(origin)
    finally:
        stop_from(mark)
    return {"r": r, "steady": f1 - f0, "steady_total": steady["total"], "killed": f2 - f1,
            "killed_total": killed["total"], "errors": killed["errors"], "steady_errors": steady["errors"]}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    for a in ("ringproxy", "testcache", "tmp", "vcl", "lua"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--replicas", type=int, action="append", required=True)
    args = ap.parse_args()
    results = []
    try:
        origin = start_origin(args.testcache, args.tmp, "--threads", "2", "--delay", str(vs.DELAY))
        vcl_text = varnish_vcl(args.vcl, origin)
        for r in args.replicas:
            res = run(r, args, origin, vcl_text)
            print(f"# replicas {r}: {res}", flush=True)
            results.append(res)
    finally:
        stop_from(0)
    print()
    print(f"Zipf s = {vs.ZIPF:g} over {vs.KEYS} URLs; 4 Varnish 7.1 (malloc,128m) in front of one origin "
          f"(testcache, {vs.DELAY} ms a fetch); each run: fresh caches warmed with every URL once "
          f"(4 clients){f' and {vs.WARM_SECS} s of the load' if vs.WARM_SECS else ''}, then wrk -t2 "
          f"-c{vs.CLIENTS} for {vs.SECS} s steady and {vs.SECS} s from a kill -9 of one Varnish; "
          f"ringproxy workers = {vs.WORKERS}, its cache off, balance_factor 1.25")
    print()
    print("| replicas | origin fetches, steady | after the kill | extra | requests after the kill | failed |")
    print("|---:|---:|---:|---:|---:|---|")
    for x in results:
        extra = x["killed"] - x["steady"] * x["killed_total"] / max(x["steady_total"], 1)
        print(f"| {x['r']} | {x['steady']:,} | {x['killed']:,} | {extra:,.0f} | {x['killed_total']:,} "
              f"| {x['errors']} |")


if __name__ == "__main__":
    main()
