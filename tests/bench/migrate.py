#!/usr/bin/env python3
"""migrate.py -- the driver of tests/bench/migrate.sh (read its header for
what is measured and the knobs, which come from the environment). One
origin testcache for the whole bench; for each run five fresh varnishd, the
NGINX in front of them and/or ringproxy, and wrk, all on 127.0.0.1; prints
the two tables and a verdict per goal. Every process it starts is stopped
by its PID (varnishd and NGINX by their process group), also when a step
fails."""

import json
import os
import re
import subprocess
import time

from benchproc import (PROCS, ZIPF_LUA, around, driver_args, free_port, get, on_slot, paced_zipf, per_second, reload_on_slot, start,
                       start_origin, start_ringproxy, start_varnish, start_wrk, stop_from, varnish_vcl, wait_for,
                       warm, wrk_figures)

WINDOW, RAMP, TAIL = int(os.environ["MIGRATE_SECONDS"]), int(os.environ["RAMP"]), int(os.environ["TAIL"])
STEADY, RATE, KEYS = int(os.environ["STEADY"]), float(os.environ["RATE"]), int(os.environ["KEYS"])
ZIPF, ONEHIT, CONNS = float(os.environ["ZIPF"]), float(os.environ["ONEHIT"]), int(os.environ["CONNS"])
WEIGHTS = [int(w) for w in os.environ["WEIGHTS"].split()]
NAMES = [f"thumbs-{i}" for i in range(1, len(WEIGHTS) + 1)]
# Every client names the site, whichever front it reaches: Varnish hashes
# the Host with the URL, NGINX passes it on ($http_host) and so does
# ringproxy, so a cached thumbnail is the same object behind either front.
HOST = "thumbs.example"
UPSTREAM = "thumbs"


def nginx_conf(wd, ports, listen):
    """The config an operator runs NGINX with in front of the caches
    (written to wd/nginx.conf, its path): hash $request_uri consistent, a
    server line a Varnish with its WEIGHTS weight, keep-alive upstream."""
    servers = "".join(f"\t\tserver 127.0.0.1:{p}{f' weight={w}' if w != 1 else ''};\n"
                      for p, w in zip(ports, WEIGHTS))
    path = os.path.join(wd, "nginx.conf")
    with open(path, "w") as f:
        f.write(f"""{"user root;" if os.getuid() == 0 else ""}
worker_processes 1;
daemon off;
pid {wd}/nginx.pid;
error_log {wd}/error.log warn;
events {{ worker_connections 4096; }}
http {{
	access_log off;
	client_body_temp_path {wd}/body;
	proxy_temp_path {wd}/proxy;
	upstream {UPSTREAM} {{
		hash $request_uri consistent;
{servers}		keepalive 64;
	}}
	server {{
		listen 127.0.0.1:{listen};
		location / {{
			proxy_pass http://{UPSTREAM};
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host $http_host;
		}}
	}}
}}
""")
    return path


def start_nginx(wd, ports):
    """NGINX in front of the Varnish ports, answering (a /health through
    it reaches a Varnish) before this returns; its port."""
    os.makedirs(wd, exist_ok=True)
    port = free_port()
    p = start(["nginx", "-p", wd, "-e", os.path.join(wd, "error.log"), "-c", nginx_conf(wd, ports, port)],
              os.path.join(wd, "nginx.log"), group=True)
    wait_for(lambda: p.poll() is None and get(port, "/health", 2)[0] == 200, 20, "nginx")
    return port


def has_import(rp):
    """Whether the build has `ringproxy import` (its usage names it)."""
    return "import nginx" in subprocess.run([rp, "import", "--help"], capture_output=True, text=True,
                                            timeout=30).stdout


def compat_ini(rp, conf, ports):
    """The ringproxy.ini of the NGINX config conf (made by nginx_conf for
    the Varnish ports), and where it came from: `ringproxy import nginx`
    where the build has it; else written here as the importer is to print
    it (scheme = nginx, a backend a server line, its id the server string
    as written)."""
    if has_import(rp):
        p = subprocess.run([rp, "import", "nginx", conf, "--upstream", UPSTREAM], capture_output=True, text=True,
                           timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"ringproxy import nginx {conf} --upstream {UPSTREAM} refused it:\n{p.stderr}")
        return p.stdout, "`ringproxy import nginx`"
    s = "[ring]\nscheme = nginx\n"
    for n, p, w in zip(NAMES, ports, WEIGHTS):
        s += f"[backend {n}]\nurl = http://127.0.0.1:{p}\nid = 127.0.0.1:{p}\nweight = {w}\n"
    return s, "written as the importer prints it"


def ini_sections(text):
    """An INI text as [[section, {key: value}]] in order, comments left
    out (ringproxy's inih takes ' ;' as the start of an inline comment)."""
    out = [["", {}]]
    for line in text.splitlines():
        t = line.strip()
        if not t or t[0] in ";#":
            continue
        if t.startswith("["):
            out.append([t[1:t.index("]")].strip(), {}])
            continue
        k, _, v = t.partition("=")
        out[-1][1][k.strip()] = re.split(r"\s;", v)[0].strip()
    return out


def bench_ini(text, scheme, ramp):
    """The INI ringproxy runs here: text's ring and backends as they are,
    [ring] scheme set to scheme (the default, ringproxy, by leaving the
    key out and the backends' ids with it), ramp, and the bench's own
    listeners and settings."""
    secs = ini_sections(text)

    def section(name):
        for h, kv in secs:
            if h == name:
                return kv
        secs.append([name, {}])
        return secs[-1][1]
    section("proxy").update({"listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0", "workers": "1",
                             "log_level": "info"})
    # bounded loads off as NGINX has none (with them on, a hot key over
    # its owner's cap is fetched once more by the next cache) and the
    # proxy's own cache off: every request reaches a Varnish, as behind
    # NGINX, and only the placement differs
    section("ring").update({"balance_factor": "0", "ramp": ramp})
    section("health").update({"path": "/health", "interval": "1s"})
    section("cache")["size"] = "0"
    if scheme == "ringproxy":
        section("ring").pop("scheme", None)
        for h, kv in secs:
            if h.startswith("backend "):
                kv.pop("id", None)
    else:
        section("ring")["scheme"] = scheme
    return "".join((f"[{h}]\n" if h else "") + "".join(f"{k} = {v}\n" for k, v in kv.items())
                   for h, kv in secs if h or kv)


def refused(rp, wd, text):
    """None when ringproxy -t accepts the INI text, else its message."""
    path = os.path.join(wd, "check.ini")
    with open(path, "w") as f:
        f.write(text)
    p = subprocess.run([rp, "-t", "-c", path], capture_output=True, text=True, timeout=30)
    return None if p.returncode == 0 else (p.stderr.strip() or p.stdout.strip())


def tier(wd, vcl_text):
    """Fresh Varnish caches, one a name; their ports."""
    return [start_varnish(n, vcl_text, wd, "malloc,64m") for n in NAMES]


def switch(label, scheme, args, origin, vcl_text):
    """A fresh tier warmed behind NGINX (every key once, then STEADY s of
    the load), then the clients moved to ringproxy with scheme (None:
    back to NGINX, the same load with no switch) for WINDOW s; the
    origin's fetches around the move and wrk's figures after it."""
    wd = os.path.join(args.tmp, label)
    mark = len(PROCS)
    try:
        ports = tier(wd, vcl_text)
        ngx = front = start_nginx(os.path.join(wd, "nginx"), ports)
        if scheme:
            text, _ = compat_ini(args.ringproxy, os.path.join(wd, "nginx", "nginx.conf"), ports)
            cfg = os.path.join(wd, "ringproxy.ini")
            with open(cfg, "w") as f:
                f.write(bench_ini(text, scheme, "0"))
            _, front, _ = start_ringproxy(args.ringproxy, cfg, os.path.join(wd, "ringproxy.log"))
        warm(ngx, KEYS, HOST)
        # the keys seen once after the switch are new ones too
        start_wrk(ngx, STEADY, ZIPF_LUA, CONNS, args=paced_zipf(KEYS, ZIPF, ONEHIT, RATE, CONNS, "b"),
                  host=HOST).communicate(timeout=STEADY + 30)
        t_switch = on_slot(origin)
        out = start_wrk(front, WINDOW + 1, ZIPF_LUA, CONNS, args=paced_zipf(KEYS, ZIPF, ONEHIT, RATE, CONNS, "a"),
                        host=HOST).communicate(timeout=WINDOW + 30)[0]
    finally:
        stop_from(mark)
    # wrk's first two seconds on NGINX left out of the steady part
    return {"label": label, **around(per_second(origin, t_switch, 2 - STEADY, WINDOW)), **wrk_figures(out)}


def move(label, ramp, args, origin, vcl_text):
    """A fresh tier warmed behind ringproxy with scheme = nginx (every key
    once), the load for STEADY s, then scheme = ringproxy by SIGHUP with
    [ring] ramp = ramp; the origin's fetches around the reload, RAMP +
    TAIL s after it, and the reload's report."""
    wd = os.path.join(args.tmp, label)
    mark = len(PROCS)
    secs = STEADY + RAMP + TAIL + 1
    try:
        ports = tier(wd, vcl_text)
        text, _ = compat_ini(args.ringproxy, nginx_conf(wd, ports, free_port()), ports)
        cfg, log = os.path.join(wd, "ringproxy.ini"), os.path.join(wd, "ringproxy.log")
        with open(cfg, "w") as f:
            f.write(bench_ini(text, "nginx", ramp))
        proxy, port, admin = start_ringproxy(args.ringproxy, cfg, log)
        warm(port, KEYS, HOST)
        wrk = start_wrk(port, secs, ZIPF_LUA, CONNS, args=paced_zipf(KEYS, ZIPF, ONEHIT, RATE, CONNS), host=HOST)
        time.sleep(STEADY)
        t_reload, line = reload_on_slot(proxy, cfg, bench_ini(text, "ringproxy", ramp), log, origin)
        out = wrk.communicate(timeout=secs + 30)[0]
        held = sum(b.get("ramp_held", 0) for b in json.loads(get(admin, "/stats")[1])["backends"])
    finally:
        stop_from(mark)
    return {"label": label, "ramp": ramp, **around(per_second(origin, t_reload, 2 - STEADY, RAMP + TAIL)),
            **wrk_figures(out), "line": line, "held": held}


def verdict(ok):
    return "met" if ok else "NOT met"


def main():
    args = driver_args("ringproxy", "testcache", "tmp", "vcl")
    rp = args.ringproxy
    # what this build can run: the compat scheme is checked once, on an
    # INI made for made-up ports
    wd = os.path.join(args.tmp, "check")
    os.makedirs(wd)
    ports = list(range(6081, 6081 + len(NAMES)))
    text, source = compat_ini(rp, nginx_conf(wd, ports, 8080), ports)
    why = refused(rp, wd, bench_ini(text, "nginx", f"{RAMP}s"))
    if why:
        print("# this ringproxy refuses scheme = nginx, the compat half is not run:\n#   " +
              why.replace("\n", "\n#   "), flush=True)
    switches, moves = [], []
    try:
        origin = start_origin(args.testcache, args.tmp, "--threads", "1")
        vcl_text = varnish_vcl(args.vcl, origin)
        for label, scheme in (("nginx", None), ("native", "ringproxy"), ("compat", "nginx")):
            if scheme == "nginx" and why:
                continue
            switches.append(switch(label, scheme, args, origin, vcl_text))
            print(f"# switch {label}: {switches[-1]}", flush=True)
        for label, ramp in (("ramp-off", "0"), ("ramp-on", f"{RAMP}s")):
            if why:
                break
            moves.append(move(label, ramp, args, origin, vcl_text))
            print(f"# move {label}: {moves[-1]}", flush=True)
    finally:
        stop_from(0)
    ng_ver = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip().split("/")[-1]
    names = {"nginx": f"NGINX {ng_ver} (no switch)", "native": "ringproxy, scheme = ringproxy (native ring)",
             "compat": f"ringproxy, scheme = nginx ({source})"}
    base = switches[0]["extra"]
    print()
    print(f"Zipf s = {ZIPF:g} over {KEYS} thumbnails (4 KiB), {ONEHIT * 100:g}% of requests for thumbnails "
          f"seen once (the steady misses); wrk -c{CONNS} paced at {RATE:g} req/s; {len(NAMES)} Varnish 7.1 "
          f"(malloc,64m, weights {' '.join(map(str, WEIGHTS))}) warmed with every thumbnail behind NGINX "
          f"(hash $request_uri consistent) and {STEADY} s of the load; then the clients move to the front "
          f"below; origin fetches in the {WINDOW} s after the move (ringproxy workers = 1, "
          f"balance_factor = 0, its cache off)")
    print()
    print("| front after the switch | client req/s | client errors | origin fetches | of warmed thumbnails | "
          "extra over no switch | origin peak req/s (1 s) |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in switches:
        print(f"| {names[r['label']]} | {r['rps']:.0f} | {r['errors']} | {r['after_total']} | {r['extra']} | "
              f"{r['extra'] - base} | {r['peak']} |")
    if moves:
        print()
        print(f"The move from scheme = nginx to scheme = ringproxy by reload, under the same load: fresh caches "
              f"warmed with every thumbnail behind ringproxy with scheme = nginx, the reload after {STEADY} s; "
              f"origin fetches in the {RAMP + TAIL} s after it")
        print()
        print("| reload | client req/s | origin steady req/s | origin peak req/s (1 s) | peak over steady | "
              "origin fetches | of warmed thumbnails | requests held on old owners |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in moves:
            print(f"| ramp = {r['ramp']} | "
                  f"{r['rps']:.0f} | {r['steady']:.1f} | {r['peak']} | {r['over']:.0f} | {r['after_total']} | "
                  f"{r['extra']} | {r['held']} |")
    print()
    warm_before = sum(r["zipf_before"] for r in switches + moves)
    native = next(r for r in switches if r["label"] == "native")
    compat = [r for r in switches if r["label"] == "compat"]
    if compat:
        extra = compat[0]["extra"] - base
        print(f"switch with scheme = nginx: {extra} extra origin fetches over no switch in the first {WINDOW} s "
              f"(goal 0: {verdict(extra <= 0)}); with the native ring: {native['extra'] - base}")
    else:
        print(f"switch with scheme = nginx: not measured (this ringproxy refuses it); with the native ring: "
              f"{native['extra'] - base} extra origin fetches over no switch in the first {WINDOW} s")
    if moves:
        off, on = moves
        ratio = on["over"] / off["over"] if off["over"] > 0 else float("inf")
        moved = re.search(r"([\d.]+)% of keys moved", off["line"])
        print(f"move to the native ring, peak over steady, ramp = {RAMP}s / ramp = 0: {on['over']:.0f} / "
              f"{off['over']:.0f} = {ratio:.3f} (goal <= 0.2: {verdict(ratio <= 0.2)})"
              f"{f'; {moved.group(1)}% of the keyspace moved' if moved else ''}")
    else:
        print("move to the native ring with a ramp: not measured (this ringproxy refuses scheme = nginx)")
    print(f"warmed thumbnails the origin fetched before any switch: {warm_before} (all runs)")


if __name__ == "__main__":
    main()
