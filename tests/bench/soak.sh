#!/usr/bin/env bash
# tests/bench/soak.sh -- the proxy under steady load for DURATION seconds
# while its config is reloaded every 5 s and a cache is killed (SIGKILL) and
# restarted every 20 s; then whether it held up. A release ringproxy
# (BUILD, default build-rel, brought up to date) in front of 5 test caches
# on 127.0.0.1.
#
#   load     wrk -t1 -c16 over 50,000 thumbnail URLs drawn Zipf-like (s = 1):
#            a few hot URLs asked again and again, a long tail asked once
#            or rarely
#   cache    the proxy's own cache is small ([cache] size = 8m, about 1,900
#            of the 4 KiB thumbnails, of the 200 MB the URLs weigh): hot
#            URLs are its hits, the tail its misses, and it evicts all the
#            time; the caches send max-age=2, stale-while-revalidate=30, so
#            every hot object goes stale every 2 s and is served stale while
#            a worker refreshes it in the background (refresh.c)
#   reloads  SIGHUP every 5 s, alternating a 4-cache and a 5-cache file
#            (cache-5 joins and leaves: a fifth of the keys move each time)
#   kills    every 20 s one cache (cache-1..4 in turn) gets SIGKILL, and is
#            started again on its port 5 s later
#
# A failed GET is one that does not end in a 2xx response: a status other
# than 2xx, or a connect, read, write or timeout error (wrk --timeout 10s).
# Goal 0. What makes it so: a GET whose cache dies before any response byte
# (connection refused, reset, closed) is retried on the next distinct cache
# ([proxy] retries = 2, the default); a pooled connection the dead cache
# left is dropped or resent; active health checks (every 500 ms, fall 2)
# and passive ones take the cache out of the walk within a second, and
# back in after rise 2 once it is up. A cache killed between writing a
# response's head and its body would cut that response short (the client
# sees its connection end: a read error): testcache writes a 4 KiB
# response with one write, so it does not happen here.
#
# The cache paths must be taken: hits, stale hits (each one starts a
# background refresh), evictions (from /stats on the admin listener).
#
# Other goals, judged after a warm-up (the first 60 s, or the first third
# of a shorter run): the proxy's RSS grows by less than 5%; its fds other
# than open connections to caches and from clients (listeners, its own
# files and pipes; a connect to a dead cache passes through) are as many
# in the 3 s from 2 s after the load as in the 5 s after the warm-up (the
# least of each, so a socket in passing does not count; a leak of one a
# reload or a kill would, and so would a client connection not closed),
# and no connection to a cache is left in CLOSE_WAIT once the load stops
# (a dead cache's sockets closed); every reload succeeds; the proxy is
# alive at the end. (Judged at the end of the load, the least over its
# last 5 s, a socket a restarted cache left in passing was once there in
# every sample of a loaded machine: what grew is printed when it fails.) Exits 1 when a goal is missed, after printing a
# Markdown table.
#
# usage: tests/bench/soak.sh DURATION_SECONDS   (env BUILD=build-rel, KEEP=1 keeps the temp dir)
set -euo pipefail

DUR=${1:?usage: soak.sh DURATION_SECONDS}
[[ "$DUR" =~ ^[0-9]+$ ]] && [ "$DUR" -ge 15 ] || { echo "soak.sh: DURATION >= 15 seconds" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
bench_init soak test        # wrk is among the test packages
# caches restarted by the chaos loop (a subshell) are stopped by PID too
trap 'while read -r p; do PIDS+=("$p"); done <"$TMP/restarted" 2>/dev/null || true; bench_cleanup' EXIT
: >"$TMP/restarted"

WARM=$((DUR / 3 < 60 ? DUR / 3 : 60))
NCACHES=5
CC_LINE="public, max-age=2, stale-while-revalidate=30"
bench_caches 1 "$NCACHES" --size 4096 --cache-control "$CC_LINE"
APORT=$(bench_free_ports 1)
disown -a       # the shell would announce each SIGKILL below

conf() { # N_CACHES
	printf '[proxy]\nlisten = 127.0.0.1:0\nworkers = 2\nlog_level = info\nadmin_listen = 127.0.0.1:%s\n' "$APORT"
	printf '\n[cache]\nsize = 8m\n'
	printf '\n[ring]\nvnodes = 160\nbalance_factor = 1.25\n'
	printf '\n[health]\npath = /__health\ninterval = 500ms\ntimeout = 400ms\nrise = 2\nfall = 2\n'
	for ((i = 1; i <= $1; i++)); do
		printf '\n[backend cache-%d]\nurl = http://127.0.0.1:%s\n' "$i" "${PORTS[i]}"
	done
}
conf 4 >"$TMP/a.ini"
conf 5 >"$TMP/b.ini"
ln -s "$TMP/a.ini" "$TMP/live.ini"

"$RP" -c "$TMP/live.ini" 2>"$TMP/rp.log" &
RPID=$!
PIDS+=($RPID)
for _ in $(seq 500); do grep -q "listening on" "$TMP/rp.log" && break; sleep 0.02; done
PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) with.*/\1/p' "$TMP/rp.log" | head -1)
[ -n "$PORT" ] || { echo "soak.sh: ringproxy did not start" >&2; cat "$TMP/rp.log" >&2; exit 1; }

cat >"$TMP/zipf.lua" <<'EOF'
-- 50,000 URLs, the k-th most popular asked with weight 1/k: a cumulative
-- table and a binary search per request. A response that is not 2xx is
-- counted as failed, with its status; the proxy's Cache-Status line tells
-- a hit, and a stale one (served while a refresh runs), from the rest.
local n, cdf, reqs = 50000, {}, {}
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
	local sum = 0
	for k = 1, n do sum = sum + 1 / k; cdf[k] = sum end
	for k = 1, n do cdf[k] = cdf[k] / sum end
	math.randomseed(os.time())
	failed, statuses, hits, stale = 0, "", 0, 0
end
function request()
	local u, lo, hi = math.random(), 1, n
	while lo < hi do
		local mid = math.floor((lo + hi) / 2)
		if cdf[mid] < u then lo = mid + 1 else hi = mid end
	end
	if not reqs[lo] then reqs[lo] = wrk.format("GET", "/thumbs/" .. lo .. "/" .. lo .. "_200x200.jpg") end
	return reqs[lo]
end
function response(status, headers, body)
	if status < 200 or status > 299 then
		failed = failed + 1
		if #statuses < 200 then statuses = statuses .. " " .. status end
	end
	local cs = headers["Cache-Status"]
	if cs then
		if cs:find("fwd=stale", 1, true) then stale = stale + 1
		elseif cs:find("; hit;", 1, true) then hits = hits + 1 end
	end
end
function done(summary, latency, requests)
	local f, st, h, sh = 0, "", 0, 0
	for _, t in ipairs(threads) do
		f = f + t:get("failed")
		st = st .. t:get("statuses")
		h = h + t:get("hits")
		sh = sh + t:get("stale")
	end
	st = st:gsub("^ ", "")
	st = st:gsub(" ", ",")
	local e = summary.errors
	io.write(string.format("RESULT requests=%d duration_us=%d non2xx=%d connect=%d read=%d write=%d timeout=%d p50_us=%d p99_us=%d max_us=%d hits=%d stale=%d statuses=%s\n",
		summary.requests, summary.duration, f, e.connect, e.read, e.write, e.timeout,
		latency:percentile(50), latency:percentile(99), latency.max, h, sh, (st == "" and "-" or st)))
end
EOF

# Samples every second: seconds, RSS kB, fds, fds other than open
# connections to caches and from clients, connections to caches in
# CLOSE_WAIT; and in FILE.kinds what those other fds are.
cat >"$TMP/sample.py" <<'EOF'
import os, sys, time
pid, port, out, dur = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
def sample():
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    inodes = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            inodes.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    tcp = {}
    with open(f"/proc/{pid}/net/tcp") as f:
        next(f)
        for line in f:
            c = line.split()
            tcp[f"socket:[{c[9]}]"] = (int(c[1].split(":")[1], 16), c[3])
    # a connection to a cache: a TCP socket whose local port is not ours
    # and that is not listening (0A)
    backend = [tcp[i] for i in inodes if i in tcp and tcp[i][0] != port and tcp[i][1] != "0A"]
    closewait = sum(1 for b in backend if b[1] == "08")
    clients = sum(1 for i in inodes if i in tcp and tcp[i][0] == port and tcp[i][1] == "01")
    kinds = {}
    others.clear()
    for i in inodes:
        if i in tcp and tcp[i][0] != port and tcp[i][1] != "0A":
            continue
        k = kind(i, tcp)
        kinds[k] = kinds.get(k, 0) + 1
    return (rss, len(inodes), len(inodes) - len(backend) - clients, closewait), kinds
others = {}
def kind(target, tcp):
    """What a non-cache fd is, for the diagnosis when the fds grow."""
    if target in tcp:
        lport, st = tcp[target]
        return "tcp %s %s" % ("listener" if st == "0A" else "client" if lport == port else "port %d" % lport, st)
    if target.startswith("socket:["):
        if not others:
            for t in ("tcp6", "udp", "udp6", "unix", "netlink"):
                try:
                    with open(f"/proc/{pid}/net/{t}") as f:
                        next(f)
                        for line in f:
                            c = line.split()
                            ino = c[6] if t == "unix" else c[9] if t.startswith(("tcp", "udp")) else c[-1]
                            others[f"socket:[{ino}]"] = t
                except OSError:
                    pass
        return others.get(target, "socket in no table (unconnected, or reset and not yet closed)")
    if target.startswith(("pipe:", "anon_inode:")):
        return target.split("[")[0] + ("[" + target.split("[")[1] if target.startswith("anon_inode:") else "")
    return target
t0 = time.monotonic()
with open(out, "w") as f:
    while time.monotonic() - t0 < dur:
        try:
            r = sample()
        except (OSError, StopIteration):
            break
        t = time.monotonic() - t0
        f.write("%.1f %d %d %d %d\n" % (t, *r[0]))
        f.flush()
        with open(out + ".kinds", "a") as k:
            k.write("%.1f %s\n" % (t, "|".join("%s=%d" % kv for kv in sorted(r[1].items()))))
        time.sleep(1)
EOF

# reloads every 5 s, alternating the files; kills every 20 s
chaos() {
	local t=0 k=0 n=0 victim=0 restart_at=-1 p
	while [ $t -lt "$DUR" ]; do
		sleep 1
		t=$((t + 1))
		if [ $((t % 5)) -eq 0 ]; then
			n=$((n + 1))
			ln -sfn "$TMP/$([ $((n % 2)) -eq 1 ] && echo b || echo a).ini" "$TMP/live.ini.new"
			mv -T "$TMP/live.ini.new" "$TMP/live.ini"
			kill -HUP "$RPID"
			echo "$t reload $n" >>"$TMP/events"
		fi
		if [ $((t % 20)) -eq 10 ] && [ $((t + 5)) -lt "$DUR" ]; then
			victim=$((k % 4 + 1))
			k=$((k + 1))
			kill -KILL "${PIDS[victim - 1]}" 2>/dev/null || true
			echo "$t kill cache-$victim" >>"$TMP/events"
			restart_at=$((t + 5))
		fi
		if [ $t -eq $restart_at ]; then
			"$TC" --listen "127.0.0.1:${PORTS[victim]}" --name "cache-$victim" --size 4096 \
				--cache-control "$CC_LINE" >>"$TMP/cache-$victim.log" 2>&1 &
			p=$!
			disown "$p"     # its SIGKILL later is no news
			PIDS[victim - 1]=$p
			echo "$p" >>"$TMP/restarted"
			echo "$t restart cache-$victim" >>"$TMP/events"
		fi
	done
}

: >"$TMP/events"
python3 "$TMP/sample.py" "$RPID" "$PORT" "$TMP/samples" "$((DUR + 3))" &
PIDS+=($!)
chaos &
CHAOS=$!
PIDS+=($CHAOS)
timeout -k 5 $((DUR + 30)) wrk -t1 -c16 -d"${DUR}s" --timeout 10s -s "$TMP/zipf.lua" \
	"http://127.0.0.1:$PORT/" >"$TMP/wrk.out" 2>&1 || true
wait "$CHAOS" 2>/dev/null || true
sleep 2     # the load is over: dead caches' sockets should be closed by now
python3 "$TMP/sample.py" "$RPID" "$PORT" "$TMP/after.samples" 3 || true
# the cache's counters: evictions, stores, coalesced waits
CSTATS=$(curl -s --max-time 10 "http://127.0.0.1:$APORT/stats" | python3 -c '
import json, sys
c = json.load(sys.stdin)["cache"]
print(c["evictions"], c["stores"], c["coalesced"], c["admissions_refused"])' 2>/dev/null || echo "0 0 0 0")
ALIVE=no
kill -0 "$RPID" 2>/dev/null && ALIVE=yes

RES=$(grep '^RESULT' "$TMP/wrk.out" || echo "RESULT requests=0")
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $RES"; }
RELOADS_OK=$(grep -c 'info: reload [0-9]*:' "$TMP/rp.log" || true)
RELOADS_BAD=$(grep -c 'reload failed' "$TMP/rp.log" || true)
RELOADS=$(grep -c ' reload ' "$TMP/events" || true)
KILLS=$(grep -c ' kill ' "$TMP/events" || true)

awk -v warm="$WARM" -v res="$RES" -v alive="$ALIVE" -v rok="$RELOADS_OK" -v rbad="$RELOADS_BAD" \
 -v cstats="$CSTATS" \
    -v rsent="$RELOADS" -v kills="$KILLS" -v dur="$DUR" -v after="$(cat "$TMP/after.samples" 2>/dev/null)" '
function kv(k,   m) { return match(" " res, " " k "=[^ ]*") ? substr(" " res, RSTART + length(k) + 2, RLENGTH - length(k) - 2) : "" }
$1 > dur - 1.5 { next }           # the load is ending (wrk may start before t0)
$1 >= warm && rss0 == "" { rss0 = $2 }
$1 >= warm { rss1 = $2; if (nbmin == "" || $4 < nbmin) nbmin = $4; if ($4 > nbmax) nbmax = $4
	if (fdmin == "" || $3 < fdmin) fdmin = $3; if ($3 > fdmax) fdmax = $3 }
$1 >= warm && $1 < warm + 5 && (nbw == "" || $4 < nbw) { nbw = $4 }
END {
	n = kv("requests"); d = kv("duration_us")
	failed = kv("non2xx") + kv("connect") + kv("read") + kv("write") + kv("timeout")
	growth = rss0 > 0 ? (rss1 - rss0) * 100 / rss0 : 999
	na = split(after, al, "\n"); cw = 0
	for (i = 1; i <= na; i++) if (split(al[i], a, " ") >= 5) {
		if (nbe == "" || a[4] < nbe) nbe = a[4]
		if (a[5] > cw) cw = a[5]
	}
	ok_failed = (n > 0 && failed == 0)
	ok_rss = (rss0 > 0 && growth < 5)
	ok_fds = (nbw != "" && nbe != "" && nbe <= nbw && cw == 0)
	ok_reload = (rbad == 0 && rok == rsent)
	ok_alive = (alive == "yes")
	split(cstats, c, " ")
	ok_cache = (kv("hits") > 0 && kv("stale") > 0 && c[1] > 0)
	printf "### Soak: %d s, wrk -t1 -c16, reload every 5 s, a cache killed every 20 s\n\n", dur
	printf "| goal | measured | met |\n|---|---|:-:|\n"
	printf "| 0 failed GETs (non-2xx, connect/read/write/timeout errors) | %d of %d (non-2xx %s [%s], connect %s, read %s, write %s, timeout %s) | %s |\n", failed, n, kv("non2xx"), kv("statuses"), kv("connect"), kv("read"), kv("write"), kv("timeout"), ok_failed ? "yes" : "NO"
	printf "| RSS growth after the first %d s < 5%% | %d kB -> %d kB (%+.2f%%) | %s |\n", warm, rss0, rss1, growth, ok_rss ? "yes" : "NO"
	printf "| fds other than open cache and client connections flat: as many after the load as after %d s; no cache connection in CLOSE_WAIT after the load | %s -> %s (%s..%s under load; all fds %s..%s); CLOSE_WAIT %d | %s |\n", warm, nbw, nbe, nbmin, nbmax, fdmin, fdmax, cw, ok_fds ? "yes" : "NO"
	printf "| every reload succeeds | %d of %d (%d failed); caches killed and restarted: %d | %s |\n", rok, rsent, rbad, kills, ok_reload ? "yes" : "NO"
	printf "| alive at the end | %s | %s |\n", alive, ok_alive ? "yes" : "NO"
	printf "| the proxy'"'"'s cache ([cache] size = 8m) hits, serves stale while refreshing, and evicts | hits %d (%.1f%%), of them stale %d; stores %d, evictions %d, refused admissions %d, coalesced %d | %s |\n", kv("hits") + kv("stale"), (n > 0 ? (kv("hits") + kv("stale")) * 100 / n : 0), kv("stale"), c[2], c[1], c[4], c[3], ok_cache ? "yes" : "NO"
	printf "\n%.0f req/s; latency p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", n / (d > 0 ? d / 1e6 : 1), kv("p50_us") / 1000, kv("p99_us") / 1000, kv("max_us") / 1000
	exit !(ok_failed && ok_rss && ok_fds && ok_reload && ok_alive && ok_cache)
}' "$TMP/samples" && exit 0

# A goal missed. If it is the fds, which kinds grew: the sample that gave the
# warm-up figure against the one that gave the end's.
python3 - "$TMP/samples" "$TMP/after.samples" "$WARM" <<'EOF'
import sys
def read(path):
    rows = [l.split() for l in open(path)]
    kinds = {l.split()[0]: (l.split(None, 1) + [""])[1].strip() for l in open(path + ".kinds")}
    return rows, kinds
def least(rows, lo, hi):
    c = [r for r in rows if lo <= float(r[0]) < hi]
    return min(c, key=lambda r: int(r[3])) if c else None
(rows, kw), (arows, ka) = read(sys.argv[1]), read(sys.argv[2])
warm = float(sys.argv[3])
w, e = least(rows, warm, warm + 5), least(arows, 0, 1e9)
if w and e and int(e[3]) > int(w[3]):
    def parse(kinds, t):
        return {k: int(v) for k, v in (x.rsplit("=", 1) for x in kinds.get(t, "").split("|") if x)}
    a, b = parse(kw, w[0]), parse(ka, e[0])
    print("\nfds other than cache connections, at %s s and %s s after the load (what changed):" % (w[0], e[0]))
    for k in sorted(set(a) | set(b)):
        if a.get(k, 0) != b.get(k, 0):
            print("  %s: %d -> %d" % (k, a.get(k, 0), b.get(k, 0)))
EOF
exit 1
