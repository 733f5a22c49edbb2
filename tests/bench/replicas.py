#!/usr/bin/env python3
"""replicas.py -- the driver of tests/bench/replicas.sh (read its header
for what is measured and the knobs, which come from the environment). For
each [ring] replicas R in turn: an origin testcache counting its fetches,
four varnishd and ringproxy (varnish-spill.py's config with replicas = R),
the caches warmed, SECS of steady Zipf load, then kill -9 of one varnishd
and SECS more of the load. With --footprint, the tier hit ratio at
equal memory: another origin answering OBJ bytes, four varnishd with
SIZE of storage each (FIT of the URL set together) for R = 1, R = 2, and
SIZE / 2 for R = 1 (what R = 2's doubled footprint predicts for it). Every
process it starts is stopped by its PID (varnishd by its process group),
also when a step fails."""

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading

from benchproc import PROCS, get, start, start_origin, start_varnish, stop_from, varnish_vcl, wait_log, warm

_spec = importlib.util.spec_from_file_location(
    "varnish_spill", os.path.join(os.path.dirname(os.path.abspath(__file__)), "varnish-spill.py"))
vs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vs)
OBJ, FIT = int(os.environ.get("OBJ", "8192")), float(os.environ.get("FIT", "0.333"))
FSECS, FWARM_SECS = int(os.environ.get("FSECS", "20")), int(os.environ.get("FWARM_SECS", "20"))


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


def tier(r, args, tmp, vcl_text, storage):
    """Four varnishd with -s storage and ringproxy with replicas = r in
    front of them, in tmp; (the proxy's port, the varnishd Popens by name)."""
    os.makedirs(tmp, exist_ok=True)
    ports, groups = {}, {}
    for i in range(1, 5):
        ports[f"thumbs-{i}"] = start_varnish(f"thumbs-{i}", vcl_text, tmp, storage)
        groups[f"thumbs-{i}"] = PROCS[-1][0]
    cfg = os.path.join(tmp, "ringproxy.ini")
    with open(cfg, "w") as f:
        f.write(vs.conf(ports).replace("[ring]\n", f"[ring]\nreplicas = {r}\n"))
    log = os.path.join(tmp, "ringproxy.log")
    start([args.ringproxy, "-c", cfg], log)
    return int(wait_log(log, r"listening on 127\.0\.0\.1:(\d+)", 20).group(1)), groups


def verdicts(tmp):
    """MAIN.cache_hit and MAIN.cache_miss summed over the four varnishd in tmp."""
    hit = miss = 0
    for i in range(1, 5):
        out = subprocess.run(["varnishstat", "-1", "-n", os.path.join(tmp, f"thumbs-{i}"), "-f", "MAIN.cache_hit",
                              "-f", "MAIN.cache_miss"], capture_output=True, text=True, timeout=30, check=True).stdout
        c = {m.group(1): int(m.group(2)) for m in re.finditer(r"^MAIN\.(\w+)\s+(\d+)", out, re.M)}
        hit, miss = hit + c["cache_hit"], miss + c["cache_miss"]
    return hit, miss


def run(r, args, origin, vcl_text):
    tmp = os.path.join(args.tmp, f"r{r}")
    mark = len(PROCS)
    try:
        port, groups = tier(r, args, tmp, vcl_text, "malloc,128m")
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


def footprint(r, size_k, args, origin, vcl_text):
    """The steady tier hit ratio with replicas = r and size_k KiB of
    storage a cache: FWARM_SECS of the load to fill the caches, then
    FSECS measured: 1 - the origin's fetches over the requests, and the
    caches' own hits over their hits and misses."""
    tmp = os.path.join(args.tmp, f"fp-r{r}-{size_k}k")
    mark = len(PROCS)
    try:
        port, _ = tier(r, args, tmp, vcl_text, f"malloc,{size_k}k")
        vs.wrk(port, FWARM_SECS, args.lua)
        out = {}
        f0, v0 = fetches(origin), verdicts(tmp)
        load(port, FSECS, args.lua, out).join()
        f1, v1 = fetches(origin), verdicts(tmp)
    finally:
        stop_from(mark)
    hit, miss = v1[0] - v0[0], v1[1] - v0[1]
    return {"r": r, "size_k": size_k, "total": out["total"], "fetches": f1 - f0, "errors": out["errors"],
            "origin_ratio": 1 - (f1 - f0) / max(out["total"], 1), "varnish_ratio": hit / max(hit + miss, 1)}


def kill_table(results):
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


def footprint_table(results, size_k):
    print(f"Zipf s = {vs.ZIPF:g} over {vs.KEYS} URLs of {OBJ:,} bytes ({vs.KEYS * OBJ / 2**20:.0f} MiB); 4 Varnish "
          f"7.1 with SIZE = malloc,{size_k}k each (together {FIT:g} of the URL set) in front of one origin "
          f"(testcache, {vs.DELAY} ms a fetch); each run: fresh caches, {FWARM_SECS} s of the load, then "
          f"wrk -t2 -c{vs.CLIENTS} for {FSECS} s measured; tier hit ratio = 1 - origin fetches / requests "
          f"(Varnish's: cache_hit / (cache_hit + cache_miss), the four summed)")
    print()
    print("| replicas | storage a cache | requests | origin fetches | tier hit ratio | Varnish's hit ratio | errors |")
    print("|---:|---|---:|---:|---:|---:|---|")
    for x in results:
        name = "SIZE" if x["size_k"] == size_k else "SIZE / 2"
        print(f"| {x['r']} | {name} ({x['size_k']:,} KiB) | {x['total']:,} | {x['fetches']:,} "
              f"| {100 * x['origin_ratio']:.1f}% | {100 * x['varnish_ratio']:.1f}% | {x['errors']} |")
    print()
    r2, half = results[1]["origin_ratio"], results[2]["origin_ratio"]
    gap = 100 * (r2 - half)
    ok = abs(gap) <= 2
    print(f"verdict: R = 2 at SIZE is {gap:+.1f} points from R = 1 at SIZE / 2 (the doubled footprint's "
          f"prediction): {'within' if ok else 'NOT within'} 2 points; R = 2 costs "
          f"{100 * (results[0]['origin_ratio'] - r2):.1f} points against R = 1 at SIZE")


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    for a in ("ringproxy", "testcache", "tmp", "vcl", "lua"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--replicas", type=int, action="append", default=[])
    ap.add_argument("--footprint", action="store_true", help="the hit ratio table, R = 1 and 2 at SIZE, 1 at SIZE / 2")
    args = ap.parse_args()
    results, fp = [], []
    # SIZE: FIT of the URL set over the four caches, in KiB
    size_k = max(2048, int(vs.KEYS * OBJ * FIT / 4 / 1024))
    try:
        origin = start_origin(args.testcache, args.tmp, "--threads", "2", "--delay", str(vs.DELAY))
        vcl_text = varnish_vcl(args.vcl, origin)
        for r in args.replicas:
            res = run(r, args, origin, vcl_text)
            print(f"# replicas {r}: {res}", flush=True)
            results.append(res)
        if args.footprint:
            # an origin of its own: objects of OBJ bytes, and its counts
            # apart from the kill runs'
            ftmp = os.path.join(args.tmp, "fp")
            os.makedirs(ftmp, exist_ok=True)
            forigin = start_origin(args.testcache, ftmp, "--threads", "2", "--delay", str(vs.DELAY),
                                   "--size", str(OBJ))
            fvcl = varnish_vcl(args.vcl, forigin)
            for r, k in ((1, size_k), (2, size_k), (1, size_k // 2)):
                res = footprint(r, k, args, forigin, fvcl)
                print(f"# footprint: {res}", flush=True)
                fp.append(res)
    finally:
        stop_from(0)
    if results:
        print()
        kill_table(results)
    if fp:
        print()
        footprint_table(fp, size_k)


if __name__ == "__main__":
    main()
