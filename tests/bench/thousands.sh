#!/bin/bash
# tests/bench/thousands.sh -- issue 28: a tier of thousands. ringproxy with
# N backends x VNODES points (backends named be-0 .. be-N-1, each a name on
# one of NCACHES test caches: a backend's identity is its name, so many
# names can share a cache and every backend answers), under load:
#   steady   wrk for SECS s: req/s, p50, p99
#   reload   wrk for SECS s while the config is reloaded (SIGHUP) every
#            RELOAD_MS ms, each time with be-0's weight flipped between 1
#            and 2 (its points change, so the ring is rebuilt): p99 against
#            steady's (goal <= 1.2x); the reloads the proxy counted
#   /stats   the admin listener's JSON, timed over TRIES requests while
#            the load runs (goal: the median <= 50 ms); its size
#   /metrics timed the same way, and `promtool check metrics` on it
#   page     the admin page timed, its size, and whether it opens with the
#            summary and shows the backends in trouble first (the one
#            that fails is in the table's first rows)
#   memory   RSS after the load, against a run with 4 backends: KiB per
#            backend
# for each N in NS. Health checks off ([health] path empty, the default);
# be-(N-3) points at a closed port: a backend in trouble, far down by name.
#
# Usage (from the source tree):
#   bash tests/bench/thousands.sh [BUILD_DIR]      # default: build-rel
#   NS="2000" SECS=5 bash tests/bench/thousands.sh
#
# Environment (defaults in brackets): NS ["2000 4096"], VNODES [160],
# NCACHES [2], WORKERS [2], CONNS [64], SECS [10], URLS [100000],
# RELOAD_MS [1000], TRIES [10], SIZE [4096]; KEEP [0]
set -euo pipefail

NS=${NS:-2000 4096}
VNODES=${VNODES:-160}
NCACHES=${NCACHES:-2}
WORKERS=${WORKERS:-2}
CONNS=${CONNS:-64}
SECS=${SECS:-10}
URLS=${URLS:-100000}
RELOAD_MS=${RELOAD_MS:-1000}
TRIES=${TRIES:-10}
SIZE=${SIZE:-4096}

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init thousands test        # promtool comes with the test packages
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "thousands.sh: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

bench_caches 1 "$NCACHES" --size "$SIZE"
for i in $(seq "$NCACHES"); do bench_wait_http "${PORTS[i]}" /__stats; done
read -r DEAD <<<"$(bench_free_ports 1)"   # nothing listens there

# rp_ini N WEIGHT0 PORT APORT: the config, be-0 of weight WEIGHT0
rp_ini() {
	printf '[proxy]\nlisten = 127.0.0.1:%s\nadmin_listen = 127.0.0.1:%s\nworkers = %s\nlog_level = warn\n' \
	    "$3" "$4" "$WORKERS"
	printf '[ring]\nvnodes = %s\n[cache]\nsize = 0\n' "$VNODES"
	awk -v n="$1" -v w0="$2" -v dead="$DEAD" -v ports="${PORTS[*]:1}" 'BEGIN {
		k = split(ports, p, " ")
		for (i = 0; i < n; i++) {
			printf "[backend be-%d]\nurl = http://127.0.0.1:%s\n", i, (i == n - 3 ? dead : p[i % k + 1])
			if (i == 0) printf "weight = %s\n", w0
		} }'
}

run_wrk() { # PORT SECONDS -> the RESULT line
	timeout -k 5 $(($2 + 20)) wrk -t2 -c"$CONNS" -d"$2"s -s "$HERE/zipf.lua" \
	    "http://127.0.0.1:$1/" -- zipf "$URLS" 0 /t/ | grep '^RESULT' || die "wrk failed on port $1"
}

# timed APORT PATH OUT: the median seconds of TRIES GETs (the last body in
# OUT)
timed() {
	for _ in $(seq "$TRIES"); do
		curl -s -o "$3" -w '%{time_total}\n' --max-time 30 "http://127.0.0.1:$1$2"
	done | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# start N: a proxy with N backends; sets RPID, PORT, APORT, INI
start() {
	read -r PORT APORT <<<"$(bench_free_ports 2)"
	INI=$TMP/rp-$1.ini
	rp_ini "$1" 1 "$PORT" "$APORT" >"$INI"
	"$RP" -c "$INI" >"$TMP/rp-$1.log" 2>&1 &
	RPID=$!
	PIDS+=($RPID)
	bench_wait_http "$APORT" /stats "$RPID"
}

# the page opens with the summary (its totals before the backends table)
# and the backend in trouble (be-(N-3)) in the table's first 10 rows
page_check() {
	python3 - "$1" "be-$(($2 - 3))" <<'PY'
import re, sys
html, sick = open(sys.argv[1], encoding="utf-8").read(), sys.argv[2]
t = html.find('id="backends"')
rows = re.findall(r'<tr class="backend" data-backend="([^"]+)"', html[t:]) if t >= 0 else []
summary = html.find("<h2>") < t if t >= 0 else False
first = rows[:10]
print("summary first" if summary else "summary not first",
      f"; {sick} (down) " + ("in" if sick in first else "not in") + " the first 10 rows",
      f"; {len(rows)} rows")
PY
}

# reload_gen <STATS_JSON: the generation of the last reload ("reload N:"
# of its report), 0 before the first
reload_gen() {
	python3 -c 'import json, re, sys
r = json.load(sys.stdin).get("last_reload") or {}
m = re.match(r"reload (\d+):", r.get("report", ""))
print(m.group(1) if m else 0)'
}

# memory with 4 backends, for the per-backend figure
start 4
run_wrk "$PORT" 3 >/dev/null
RSS4=$(bench_rss_kib "$RPID")
bench_stop "$RPID"

out=$TMP/table.md
: >"$out"
for n in $NS; do
	log "N=$n: start"
	t0=$(date +%s.%N)
	start "$n"
	log "N=$n: up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
	run_wrk "$PORT" 2 >/dev/null         # warm: the pools fill
	bench_quiet
	steady=$(run_wrk "$PORT" "$SECS")
	rss=$(bench_rss_kib "$RPID")

	# admin endpoints timed while the load runs
	run_wrk "$PORT" $((SECS + 5)) >"$TMP/load-$n.txt" &
	lpid=$!
	sleep 1
	t_stats=$(timed "$APORT" /stats "$TMP/stats-$n.json")
	t_metrics=$(timed "$APORT" /metrics "$TMP/metrics-$n.txt")
	t_page=$(timed "$APORT" / "$TMP/page-$n.html")
	wait "$lpid" || true
	if promtool check metrics <"$TMP/metrics-$n.txt" >"$TMP/promtool-$n.txt" 2>&1; then
		prom="clean"
	else
		prom="NOT clean: $(head -3 "$TMP/promtool-$n.txt" | tr '\n' ' ')"
	fi
	page=$(page_check "$TMP/page-$n.html" "$n")

	# reloads under load
	r0=$(reload_gen <"$TMP/stats-$n.json")
	run_wrk "$PORT" "$SECS" >"$TMP/reload-$n.txt" &
	lpid=$!
	w=1
	end=$(($(date +%s) + SECS))
	while [ "$(date +%s)" -lt "$end" ]; do
		sleep "$(awk -v m="$RELOAD_MS" 'BEGIN { print m / 1000 }')"
		w=$((3 - w))
		rp_ini "$n" "$w" "$PORT" "$APORT" >"$INI.new" && mv "$INI.new" "$INI"
		kill -HUP "$RPID"
	done
	wait "$lpid" || true
	reload=$(cat "$TMP/reload-$n.txt")
	sleep 1
	r1=$(curl -s --max-time 30 "http://127.0.0.1:$APORT/stats" | reload_gen)

	awk -v n="$n" -v v="$VNODES" -v s99="$(bench_kv p99_us "$steady")" -v r99="$(bench_kv p99_us "$reload")" \
	    -v sn="$(bench_kv requests "$steady")" -v sd="$(bench_kv duration_us "$steady")" \
	    -v rn="$(bench_kv requests "$reload")" -v rd="$(bench_kv duration_us "$reload")" \
	    -v se="$(bench_kv errors "$steady")" -v re="$(bench_kv errors "$reload")" \
	    -v reloads="$((r1 - r0))" -v ts="$t_stats" -v tm="$t_metrics" -v tp="$t_page" \
	    -v ss="$(stat -c %s "$TMP/stats-$n.json")" -v ms="$(stat -c %s "$TMP/metrics-$n.txt")" \
	    -v ps="$(stat -c %s "$TMP/page-$n.html")" -v prom="$prom" -v page="$page" \
	    -v rss="$rss" -v rss4="$RSS4" 'BEGIN {
		printf "| %d x %d | %.0f req/s, p99 %.1f ms, %d errors | %.0f req/s, p99 %.1f ms = %.2fx steady, %d errors, %d reloads | %.1f ms (%.0f KiB) | %.1f ms (%.0f KiB), promtool %s | %.1f ms (%.0f KiB): %s | %.1f MiB, %.1f KiB a backend |\n",
		    n, v, sn / (sd / 1e6), s99 / 1000, se, rn / (rd / 1e6), r99 / 1000, r99 / s99, re, reloads,
		    ts * 1000, ss / 1024, tm * 1000, ms / 1024, prom, tp * 1000, ps / 1024, page,
		    rss / 1024, (rss - rss4) / (n - 4) }' >>"$out"
	bench_stop "$RPID"
done

echo
echo "### a tier of thousands (commit $(git -C "$ROOT" rev-parse --short HEAD))"
echo
echo "wrk -t2 -c$CONNS, $URLS URLs uniform, ${SECS} s a phase, $WORKERS workers, [cache] size = 0," \
     "$NCACHES testcaches behind all the backends' names; reload every $RELOAD_MS ms;" \
     "admin timings: median of $TRIES under load; $(nproc) CPUs."
echo
echo "| backends x vnodes | steady | reloading | /stats | /metrics | page | RSS |"
echo "|---|---|---|---:|---|---|---|"
cat "$out"
