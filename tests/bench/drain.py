#!/usr/bin/env python3
"""drain.py -- the driver of tests/bench/drain.sh (read its header for what
is measured and the knobs, which come from the environment). Starts an
origin testcache, four varnishd, ringproxy and wrk on 127.0.0.1, takes one
cache out with `ringproxy ctl maint` and, in a second run on fresh caches,
with `ringproxy ctl drain`, and prints the table. Every process it starts
is stopped by its PID, also when a step fails."""

import json
import os
import re
import subprocess
import time

from benchproc import (PROCS, ZIPF_LUA, around, driver_args, get, on_slot, paced_zipf, per_second, start_origin, start_ringproxy,
                       start_varnish, start_wrk, stop_all_but, stop_from, varnish_vcl, warm, wrk_figures)

ENV = {k: os.environ[k] for k in ("DRAIN", "STEADY", "TAIL", "RATE", "KEYS", "ZIPF", "ONEHIT", "CONNS")}
DRAIN, STEADY, TAIL = float(ENV["DRAIN"]), float(ENV["STEADY"]), float(ENV["TAIL"])
RATE, KEYS, ZIPF = float(ENV["RATE"]), int(ENV["KEYS"]), float(ENV["ZIPF"])
ONEHIT, CONNS = float(ENV["ONEHIT"]), int(ENV["CONNS"])
OUT = "thumbs-2"        # the cache taken out


def conf(ports, admin="127.0.0.1:0"):
    s = f"[proxy]\nlisten = 127.0.0.1:0\nadmin_listen = {admin}\nworkers = 1\nlog_level = info\n"
    # bounded loads off: the caps would send some held keys on at this low
    # concurrency, and the run is about the drain
    s += "[ring]\nbalance_factor = 0\n"
    # the proxy's own cache off: it would hold the hot keys and keep them
    # from the caches, whose fetches the run counts
    s += "[cache]\nsize = 0\n"
    s += "[health]\npath = /health\ninterval = 1s\n"
    for n in sorted(ports):
        s += f"[backend {n}]\nurl = http://127.0.0.1:{ports[n]}\n"
    return s


def run(label, verb, args, origin, vcl_text):
    """One change under load: the per-second series and the figures."""
    tmp = os.path.join(args.tmp, label)
    os.makedirs(tmp, exist_ok=True)
    ports = {n: start_varnish(n, vcl_text, tmp, "malloc,64m") for n in (f"thumbs-{i}" for i in range(1, 5))}
    cfg = os.path.join(tmp, "ringproxy.ini")
    with open(cfg, "w") as f:
        f.write(conf(ports))
    log = os.path.join(tmp, "ringproxy.log")
    proxy, port, admin = start_ringproxy(args.ringproxy, cfg, log)
    cli = os.path.join(tmp, "ctl.ini")
    with open(cli, "w") as f:
        f.write(conf(ports, f"127.0.0.1:{admin}"))
    warm(port, KEYS)
    get(origin, "/__reset")
    secs = int(STEADY + DRAIN + TAIL + 1)
    wrk = start_wrk(port, secs, ZIPF_LUA, CONNS, args=paced_zipf(KEYS, ZIPF, ONEHIT, RATE, CONNS))
    time.sleep(STEADY)
    t0 = on_slot(origin)
    argv = [args.ringproxy, "ctl", "-c", cli, verb, OUT] + ([f"{DRAIN:g}s"] if verb == "drain" else [])
    ans = json.loads(subprocess.run(argv, capture_output=True, timeout=30, check=True).stdout)
    out, _ = wrk.communicate(timeout=secs + 30)
    st = json.loads(get(admin, "/stats")[1])
    with open(log) as f:
        line = re.search(r"ctl from [^\n]*", f.read()).group(0)
    stop_all_but(ORIGIN)
    buckets = per_second(origin, t0, -int(STEADY) + 2, int(DRAIN + TAIL))
    w = wrk_figures(out)
    failed = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    failed += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return {"label": label, "series": buckets, **around(buckets), "rps": w["rps"], "total": w["total"],
            "failed": failed, "errors": w["errors"], "line": line, "moved": ans["moved_share"],
            "held": sum(b["ramp_held"] for b in st["backends"])}


ORIGIN = []


def main():
    args = driver_args("ringproxy", "testcache", "tmp", "vcl")
    try:
        origin = start_origin(args.testcache, args.tmp, "--threads", "1")
        ORIGIN.append(PROCS[-1][0])
        vcl_text = varnish_vcl(args.vcl, origin)
        results = []
        for label, verb in (("maint", "maint"), ("drain", "drain")):
            r = run(label, verb, args, origin, vcl_text)
            r["name"] = f"ctl maint {OUT}" if verb == "maint" else f"ctl drain {OUT} {DRAIN:g}s"
            results.append(r)
            print(f"# {r['name']}: {r['line']}", flush=True)
    finally:
        stop_from()
    maint, drain = results
    print()
    print(f"Zipf s = {ZIPF:g} over {KEYS} keys (4 KiB), {ONEHIT * 100:g}% of requests for keys seen once; "
          f"wrk -c{CONNS} paced at {RATE:g} req/s; 4 Varnish 7.1 (malloc,64m) warmed with every key, "
          f"{OUT} taken out after {STEADY:g} s; ringproxy workers = 1, balance_factor = 0")
    print()
    print("| run | client req/s | requests | failed | origin steady fetches/s | origin peak fetches/s (1 s) | "
          "peak over steady | extra fetches (moved keys) | requests held on the draining cache |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | {r['rps']:.0f} | {r['total']} | {r['failed']} | {r['steady']:.1f} | {r['peak']:.0f} | "
              f"{r['over']:.0f} | {r['extra']:.0f} | {r['held']} |")
    ratio = drain["peak"] / maint["peak"] if maint["peak"] > 0 else float("inf")
    over = drain["over"] / maint["over"] if maint["over"] > 0 else float("inf")
    print()
    print(f"origin peak, drain / maint: {ratio:.3f} (goal <= 0.2: {'met' if ratio <= 0.2 else 'NOT met'}); "
          f"peak over steady: {over:.3f}; failed requests: {maint['failed']} and {drain['failed']} "
          f"(goal 0: {'met' if maint['failed'] + drain['failed'] == 0 else 'NOT met'}); "
          f"{100 * maint['moved']:.1f}% of the keyspace moved off {OUT}")


if __name__ == "__main__":
    main()
