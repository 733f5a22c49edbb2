#!/usr/bin/env python3
"""ramp.py -- the driver of tests/bench/ramp.sh (read its header for what
is measured and the knobs, which come from the environment). Starts an
origin testcache, five varnishd, ringproxy and wrk on 127.0.0.1, runs the
change with ramp = 0 and ramp = RAMP, prints the table, writes the series
as CSV and the plot as SVG (drawn here, standard library only). Every
process it starts is stopped by its PID, also when a step fails."""

import html
import json
import os
import re
import time

from benchproc import (PROCS, ZIPF_LUA, around, driver_args, get, paced_zipf, per_second, reload_on_slot, start_origin, start_ringproxy,
                       start_varnish, start_wrk, stop_all_but, stop_from, varnish_vcl, warm, wrk_figures)

ENV = {k: os.environ[k] for k in ("RAMP", "STEADY", "TAIL", "RATE", "KEYS", "ZIPF", "ONEHIT", "CONNS")}
RAMP, STEADY, TAIL = float(ENV["RAMP"]), float(ENV["STEADY"]), float(ENV["TAIL"])
RATE, KEYS, ZIPF = float(ENV["RATE"]), int(ENV["KEYS"]), float(ENV["ZIPF"])
ONEHIT, CONNS = float(ENV["ONEHIT"]), int(ENV["CONNS"])


def conf(ports, names, ramp):
    s = "[proxy]\nlisten = 127.0.0.1:0\nadmin_listen = 127.0.0.1:0\nworkers = 1\nlog_level = info\n"
    # bounded loads off: the caps would send some held keys to the new
    # cache at this low concurrency, and the run is about the ramp
    s += f"[ring]\nbalance_factor = 0\nramp = {ramp}\n"
    # the proxy's own cache off: it would hold the hot keys and keep them
    # from the caches, whose fetches the run counts
    s += "[cache]\nsize = 0\n"
    s += "[health]\npath = /health\ninterval = 1s\n"
    for n in names:
        s += f"[backend {n}]\nurl = http://127.0.0.1:{ports[n]}\n"
    return s


def run(label, ramp, args, origin, vcl_text):
    """One change under load; the per-second series and the figures."""
    tmp = os.path.join(args.tmp, label)
    os.makedirs(tmp, exist_ok=True)
    names = [f"thumbs-{i}" for i in range(1, 6)]
    ports = {n: start_varnish(n, vcl_text, tmp, "malloc,64m") for n in names}
    cfg = os.path.join(tmp, "ringproxy.ini")
    with open(cfg, "w") as f:
        f.write(conf(ports, names[:4], ramp))
    log = os.path.join(tmp, "ringproxy.log")
    proxy, port, admin = start_ringproxy(args.ringproxy, cfg, log)
    warm(port, KEYS)
    get(origin, "/__reset")
    secs = int(STEADY + RAMP + TAIL + 1)
    wrk = start_wrk(port, secs, ZIPF_LUA, CONNS, args=paced_zipf(KEYS, ZIPF, ONEHIT, RATE, CONNS))
    time.sleep(STEADY)
    t_reload, line = reload_on_slot(proxy, cfg, conf(ports, names, ramp), log, origin)
    out, _ = wrk.communicate(timeout=secs + 30)
    st = json.loads(get(admin, "/stats")[1])
    stop_all_but(ORIGIN)
    first = -int(STEADY) + 2            # wrk's first two seconds left out
    last = int(RAMP + TAIL)
    buckets = per_second(origin, t_reload, first, last)
    rps = wrk_figures(out)["rps"]
    held = sum(b["ramp_held"] for b in st["backends"])
    return {"label": label, "ramp": ramp, "series": [(k, float(r)) for k, r, _ in buckets], **around(buckets),
            "rps": rps, "line": line, "held": held, "moved": re.search(r"([\d.]+)% of keys moved", line).group(1)}


ORIGIN = []


def svg(results, path):
    """Both runs' origin requests per second against seconds from the
    change, the ramp window shaded."""
    W, H, L, R, T, B = 760, 360, 60, 20, 40, 50
    xs = [k for r in results for k, _ in r["series"]]
    x0, x1 = min(xs), max(xs) + 1
    ymax = max(v for r in results for _, v in r["series"])
    step = next(s for s in (5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000) if ymax / s <= 8)
    ymax = step * (int(ymax / step) + 1)

    def px(x):
        return L + (x - x0) / (x1 - x0) * (W - L - R)

    def py(y):
        return H - B - y / ymax * (H - T - B)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">origin requests per second around '
         f'the change (a fifth Varnish added by reload)</text>',
         f'<rect x="{px(0):.1f}" y="{T}" width="{px(RAMP) - px(0):.1f}" height="{H - T - B}" fill="#e8f0fb"/>',
         f'<text x="{px(RAMP / 2):.1f}" y="{T + 14}" text-anchor="middle" fill="#456">ramp window '
         f'({RAMP:g} s)</text>']
    for y in range(0, int(ymax) + 1, step):
        o.append(f'<line x1="{L}" x2="{W - R}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y}</text>')
    for x in range(int(x0 // 10 * 10), int(x1) + 1, 10):
        if x0 <= x <= x1:
            o.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{H - B}" y2="{H - B + 4}" stroke="#333"/>')
            o.append(f'<text x="{px(x):.1f}" y="{H - B + 17}" text-anchor="middle">{x}</text>')
    o.append(f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="#333"/>')
    o.append(f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="#333"/>')
    o.append(f'<line x1="{px(0):.1f}" x2="{px(0):.1f}" y1="{T}" y2="{H - B}" stroke="#333" '
             f'stroke-dasharray="4 3"/>')
    o.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">seconds from the reload '
             f'(1 s buckets)</text>')
    o.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 16 {(T + H - B) / 2})">origin requests/s</text>')
    colors = ["#c0392b", "#1f5fa8"]
    for i, r in enumerate(results):
        pts = " ".join(f"{px(k + 0.5):.1f},{py(v):.1f}" for k, v in r["series"])
        o.append(f'<polyline points="{pts}" fill="none" stroke="{colors[i]}" stroke-width="1.6"/>')
        o.append(f'<line x1="{W - R - 250}" x2="{W - R - 226}" y1="{T + 34 + 18 * i}" y2="{T + 34 + 18 * i}" '
                 f'stroke="{colors[i]}" stroke-width="2"/>')
        o.append(f'<text x="{W - R - 220}" y="{T + 38 + 18 * i}">{html.escape(r["name"])}: peak over steady '
                 f'{r["over"]:.0f}/s</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    args = driver_args("ringproxy", "testcache", "tmp", "vcl", "svg")
    try:
        origin = start_origin(args.testcache, args.tmp, "--threads", "1")
        ORIGIN.append(PROCS[-1][0])
        vcl_text = varnish_vcl(args.vcl, origin)
        results = []
        for label, ramp in (("off", "0"), ("on", f"{RAMP:g}s")):
            r = run(label, ramp, args, origin, vcl_text)
            r["name"] = "ramp = 0" if ramp == "0" else f"ramp = {RAMP:g}s"
            results.append(r)
            print(f"# {r['name']}: {r['line']}", flush=True)
    finally:
        stop_from()
    off, on = results
    print()
    print(f"Zipf s = {ZIPF:g} over {KEYS} keys (4 KiB), {ONEHIT * 100:g}% of requests for keys seen once; "
          f"wrk -c{CONNS} paced at {RATE:g} req/s; 4 Varnish 7.1 (malloc,64m) warmed with every key, "
          f"a fifth added by reload after {STEADY:g} s; ringproxy workers = 1, balance_factor = 0")
    print()
    print("| run | client req/s | origin steady req/s | origin peak req/s (1 s) | peak over steady | "
          "extra misses (moved keys fetched) | requests held on old owners |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | {r['rps']:.0f} | {r['steady']:.1f} | {r['peak']:.0f} | {r['over']:.0f} | "
              f"{r['extra']:.0f} | {r['held']} |")
    ratio = on["over"] / off["over"] if off["over"] > 0 else float("inf")
    print()
    print(f"peak over steady, ramp / no ramp: {ratio:.3f} (goal <= 0.2: {'met' if ratio <= 0.2 else 'NOT met'}); "
          f"extra misses, ramp / no ramp: {on['extra']:.0f} / {off['extra']:.0f} "
          f"({'no larger: met' if on['extra'] <= off['extra'] else 'larger: NOT met'}); "
          f"{off['moved']}% of the keyspace moved; Zipf-key fetches in the steady part: "
          f"{off['zipf_before']:.0f} and {on['zipf_before']:.0f}")
    csv = os.path.splitext(args.svg)[0] + ".csv"
    os.makedirs(os.path.dirname(os.path.abspath(args.svg)), exist_ok=True)
    with open(csv, "w") as f:
        f.write("second," + ",".join(r["name"] for r in results) + "\n")
        for (k, a), (_, b) in zip(off["series"], on["series"]):
            f.write(f"{k},{a:.1f},{b:.1f}\n")
    svg(results, args.svg)
    print(f"\nper-second series: {csv}\nplot: {args.svg}")


if __name__ == "__main__":
    main()
