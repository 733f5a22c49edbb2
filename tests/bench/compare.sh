#!/bin/bash
# tests/bench/compare.sh -- ringproxy against HAProxy and NGINX, side by side,
# on the same four test caches, with the same load, alternately in one run.
#
# Usage (from the source tree):
#   bash tests/bench/compare.sh [BUILD_DIR]          # default: build-rel
#   ROUNDS=3 SECS=10 bash tests/bench/compare.sh
#   PROFILE=1 ROUNDS=1 SECS=5 bash tests/bench/compare.sh   # + strace, perf
#
# Environment (defaults in brackets):
#   ROUNDS [3]     rounds; each round runs every proxy once, in a rotated order
#   SECS [10]      measured seconds per run (wrk -d)
#   WARM [1]       unmeasured wrk seconds right before each run (fills pools)
#   WORKERS [2]    ringproxy workers = HAProxy nbthread = NGINX worker_processes
#   WRK_THREADS [2], CONNS [64]   wrk -t and -c
#   WRK_ARGS []    more wrk arguments, e.g. "-H 'Connection: close'" for a
#                  new connection per request (word-split, quotes honoured)
#   URLS [100000]  distinct URLs /thumbs/<n>/<n>_200x200.jpg, drawn uniformly
#   SIZE [4096]    response body bytes (testcache --size)
#   TC_THREADS [1] threads per testcache (there are 4 testcaches)
#   PROXIES ["ringproxy haproxy nginx"]
#   CACHE []       ringproxy's [cache] size (e.g. 0: off); empty: the product
#                  default (64m). testcache sends max-age=3600, so over
#                  URLS uniform URLs a 64m cache answers some requests
#   ACCESS_LOG []  ringproxy's [log] access (a path, stderr; not "before"'s):
#                  with BASE set to a build of the same commit, the run
#                  measures what the access log costs a request
#   ACCESS_FORMAT [combined]  its [log] access_format
#   BASE []        a second ringproxy build dir (e.g. of the commit before a
#                  change): adds the proxy "before" to the run, same config,
#                  alternating with the others, and a before/after table
#   PROFILE [0]    1: afterwards, strace -c (syscalls per request) of ringproxy
#                  and HAProxy, and a perf profile of ringproxy, same load
#   PROF_SECS [5]  length of each profiling load
#   KEEP [0]       1: keep the temp dir (configs, logs, raw results)
#   QUIET_PCT [10], QUIET_WAIT [30]   before each run wait up to QUIET_WAIT s
#                  for the machine to be under QUIET_PCT % busy (0: don't)
#   MAX_OTHER [5], RETRIES [2]   a run during which other processes took
#                  more than MAX_OTHER % of the CPUs is repeated, at most
#                  RETRIES times; the last attempt counts
#
# What it does: installs what is missing (tests/deps.sh bench: haproxy,
# nginx-light, wrk), brings the release build in BUILD_DIR up to date, starts 4 testcaches and the three proxies on
# free 127.0.0.1 ports with configs generated into a temp dir, then for each
# round and proxy: WARM s of unmeasured load, then SECS s of wrk with a Lua
# script (random URL per request, precise p50/p99 from done()).  Per run it
# records req/s, p50, p99, the proxy's CPU per request (CPU time of all its
# threads over the run, all NGINX processes summed, divided by the requests
# wrk completed; split into user and system by utime:stime) and its RSS
# (VmRSS, summed for NGINX) after the run.  It prints every run, then the median per proxy, ringproxy's ratios to
# HAProxy and the goals (CPU <= 0.9x, req/s >= 1.1x, p99 <= 1.0x HAProxy).
# Every process it starts is stopped by PID on exit; every load is bounded
# by `timeout`.
#
# Fairness and caveats:
# - All three proxies forward to the same 4 testcaches (each with
#   TC_THREADS threads) with persistent backend keep-alive, hash on the
#   request URI with a consistent ring and a bounded-load factor of 1.5
#   (HAProxy hash-balance-factor 150 = ringproxy balance_factor 1.5, not
#   its default 1.25; NGINX has no bounded load), and serve the same wrk
#   load.  NGINX's
#   keepalive_requests (client and upstream) is raised so it does not close
#   connections every 1000 requests, which HAProxy and ringproxy never do.
# - Each product keeps its defaults otherwise: ringproxy adds
#   X-Forwarded-For and its X-Ringproxy-Backend response header; HAProxy and
#   NGINX add neither.  No access logs anywhere.
# - The order rotates every round (R H N, H N R, N R H, ...) so drift in the
#   machine (thermal, noisy neighbours) does not always favour one proxy.
# - On a small machine (2 cores here) wrk, the 4 testcaches and the proxy
#   share the CPUs, so req/s and latency measure the whole system, not the
#   proxy alone: a proxy that burns less CPU leaves more to wrk and the
#   caches and so also shows more req/s.  CPU us/req is the most
#   machine-independent figure; req/s and p99 are only comparable within one
#   run.  Idle proxies stay up during the others' runs (they cost nothing
#   measurable while idle).
# - CPU per request is exact: the sum of /proc/PID/task/*/schedstat (ns on
#   CPU) over the run.  Its split into user and system time uses the ratio of
#   utime to stime from /proc/PID/stat, which come in clock ticks (10 ms).
# - On a shared machine other people's work (compilers, test suites) steals
#   CPU at random moments and moves req/s and p99 by 30% or more.  Before
#   each run the script waits for a quiet second (QUIET_PCT), and every run
#   reports "other CPU %": machine-wide user+system time minus that of the
#   proxy, the caches and wrk, as a share of all CPUs.  Distrust runs where
#   it is more than a few percent (MAX_OTHER repeats such runs); use more
#   ROUNDS when the box is shared.  CPU us/req moves least with such noise.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
WARM=${WARM:-1}
WORKERS=${WORKERS:-2}
WRK_THREADS=${WRK_THREADS:-2}
CONNS=${CONNS:-64}
WRK_ARGS=${WRK_ARGS:-}
URLS=${URLS:-100000}
SIZE=${SIZE:-4096}
TC_THREADS=${TC_THREADS:-1}
PROXIES=${PROXIES:-ringproxy haproxy nginx}
PROFILE=${PROFILE:-0}
PROF_SECS=${PROF_SECS:-5}
KEEP=${KEEP:-0}
QUIET_PCT=${QUIET_PCT:-10}
QUIET_WAIT=${QUIET_WAIT:-30}
MAX_OTHER=${MAX_OTHER:-5}
RETRIES=${RETRIES:-2}
NCACHES=4

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init compare

die() { echo "compare.sh: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

# --- backends ----------------------------------------------------------------
bench_caches 1 "$NCACHES" --size "$SIZE" --threads "$TC_THREADS"
for i in $(seq $NCACHES); do bench_wait_http "${PORTS[i]}" /__stats; done

# --- proxies -------------------------------------------------------------
read -r RP_PORT HA_PORT NG_PORT BASE_PORT <<<"$(bench_free_ports 4)"
if [ -n "${BASE:-}" ]; then
	ninja -C "$BASE" >/dev/null
	[ -x "$BASE/src/ringproxy" ] || die "BASE=$BASE has no src/ringproxy"
	[[ " $PROXIES " == *" before "* ]] || PROXIES="$PROXIES before"
fi

{
	printf '[proxy]\nlisten = 127.0.0.1:%s\nworkers = %s\nlog_level = warn\n' \
	    "$RP_PORT" "$WORKERS"
	printf '[ring]\nvnodes = 160\nbalance_factor = 1.5\n'
	for i in $(seq $NCACHES); do
		printf '[backend cache-%s]\nurl = http://127.0.0.1:%s\n' \
		    "$i" "${PORTS[i]}"
	done
} >"$TMP/ringproxy.ini"
sed "s/^listen = .*/listen = 127.0.0.1:$BASE_PORT/" "$TMP/ringproxy.ini" >"$TMP/before.ini"
# the hot-object cache's size for ringproxy (not for "before": a build from
# before the cache would refuse the section); empty: the product default
if [ -n "${CACHE:-}" ]; then
	printf '[cache]\nsize = %s\n' "$CACHE" >>"$TMP/ringproxy.ini"
fi
if [ -n "${ACCESS_LOG:-}" ]; then
	printf '[log]\naccess = %s\naccess_format = %s\n' "$ACCESS_LOG" "${ACCESS_FORMAT:-combined}" \
	    >>"$TMP/ringproxy.ini"
fi

{
	bench_haproxy_head
	cat <<EOF
frontend fe
	bind 127.0.0.1:$HA_PORT
	default_backend caches
backend caches
	balance uri
	hash-type consistent
	hash-balance-factor 150
EOF
	for i in $(seq $NCACHES); do
		printf '\tserver cache-%s 127.0.0.1:%s\n' "$i" "${PORTS[i]}"
	done
} >"$TMP/haproxy.cfg"

mkdir -p "$TMP/nginx"
{
	bench_nginx_head
	cat <<EOF
	upstream caches {
		hash \$request_uri consistent;
EOF
	for i in $(seq $NCACHES); do
		printf '\t\tserver 127.0.0.1:%s;\n' "${PORTS[i]}"
	done
	cat <<EOF
		keepalive $CONNS;
		keepalive_requests 1000000;
	}
	server {
		listen 127.0.0.1:$NG_PORT;
		location / {
			proxy_pass http://caches;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
EOF
} >"$TMP/nginx.conf"

declare -A ppid pport
start_proxy() {
	case $1 in
	ringproxy)
		"$RP" -c "$TMP/ringproxy.ini" >"$TMP/ringproxy.log" 2>&1 &
		pport[$1]=$RP_PORT ;;
	before)
		"$BASE/src/ringproxy" -c "$TMP/before.ini" >"$TMP/before.log" 2>&1 &
		pport[$1]=$BASE_PORT ;;
	haproxy)
		haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
		pport[$1]=$HA_PORT ;;
	nginx)
		nginx -p "$TMP/nginx" -e "$TMP/nginx/error.log" \
		    -c "$TMP/nginx.conf" >"$TMP/nginx.log" 2>&1 &
		pport[$1]=$NG_PORT ;;
	*) die "unknown proxy $1" ;;
	esac
	ppid[$1]=$!
	PIDS+=($!)
	bench_wait_http "${pport[$1]}" / "${ppid[$1]}"
}
for p in $PROXIES; do start_proxy "$p"; done

# The processes of a proxy: its PID and (NGINX) its worker processes.
proxy_pids() {
	local p=${ppid[$1]}
	echo "$p" $(cat /proc/"$p"/task/*/children 2>/dev/null)
}
HZ=$(getconf CLK_TCK)
cache_pids=("${PIDS[@]:0:$NCACHES}")
# --- load ----------------------------------------------------------------
cat >"$TMP/thumbs.lua" <<'EOF'
-- Random thumbnail URLs out of N distinct ones; requests are formatted once
-- per thread in init() so that wrk spends its CPU on the socket, not in Lua.
local nthreads = 0
function setup(thread)
	nthreads = nthreads + 1
	thread:set("tid", nthreads)
end
local reqs, n = {}, 0
function init(args)
	n = tonumber(args[1]) or 100000
	math.randomseed(7919 * (tid or 1) + os.time())
	for i = 1, n do
		reqs[i] = wrk.format("GET", "/thumbs/" .. i .. "/" .. i .. "_200x200.jpg")
	end
end
function request()
	return reqs[math.random(n)]
end
function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format(
		"RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d\n",
		summary.requests, summary.duration,
		latency:percentile(50), latency:percentile(99),
		e.connect + e.read + e.write + e.status + e.timeout))
end
EOF

# run_wrk PORT SECONDS -> prints the RESULT line
run_wrk() {
	local extra=()
	[ -n "$WRK_ARGS" ] && eval "extra=($WRK_ARGS)"
	timeout -k 5 $(($2 + 20)) wrk -t"$WRK_THREADS" -c"$CONNS" -d"$2"s "${extra[@]}" \
	    -s "$TMP/thumbs.lua" "http://127.0.0.1:$1/" -- "$URLS" |
	    grep '^RESULT' || die "wrk failed on port $1"
}
runs=$TMP/runs.tsv
: >"$runs"
log "caches: ${PORTS[*]}; ringproxy :$RP_PORT haproxy :$HA_PORT nginx :$NG_PORT"
log "$ROUNDS rounds x ${SECS}s, wrk -t$WRK_THREADS -c$CONNS $WRK_ARGS, $URLS URLs, ${SIZE} B bodies, $WORKERS workers, testcache --threads $TC_THREADS"
read -r -a order <<<"$PROXIES"
for r in $(seq "$ROUNDS"); do
	for k in $(seq 0 $((${#order[@]} - 1))); do
		p=${order[$(((k + r - 1) % ${#order[@]}))]}
		port=${pport[$p]}
		for attempt in $(seq 0 "$RETRIES"); do
			bench_quiet
			[ "$WARM" -gt 0 ] && run_wrk "$port" "$WARM" >/dev/null
			read -r -a pp <<<"$(proxy_pids "$p")"
			read -r u0 s0 <<<"$(bench_cpu_ticks "${pp[@]}")"
			ns0=$(bench_cpu_ns "${pp[@]}")
			read -r c0 c0s <<<"$(bench_cpu_ticks "${cache_pids[@]}")"
			w0=$(bench_child_ticks); read -r b0 t0 <<<"$(bench_sys_ticks)"
			res=$(run_wrk "$port" "$SECS")
			read -r b1 t1 <<<"$(bench_sys_ticks)"; w1=$(bench_child_ticks)
			read -r c1 c1s <<<"$(bench_cpu_ticks "${cache_pids[@]}")"
			read -r u1 s1 <<<"$(bench_cpu_ticks "${pp[@]}")"
			ns1=$(bench_cpu_ns "${pp[@]}")
			ours=$((u1 - u0 + s1 - s0 + c1 + c1s - c0 - c0s + w1 - w0))
			other=$(((b1 - b0 - ours) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1)))
			[ "$other" -lt 0 ] && other=0
			rss=$(bench_rss_kib "${pp[@]}")
			n=$(bench_kv requests "$res"); d=$(bench_kv duration_us "$res")
			awk -v p="$p" -v r="$r" -v n="$n" -v d="$d" \
			    -v p50="$(bench_kv p50_us "$res")" -v p99="$(bench_kv p99_us "$res")" \
			    -v e="$(bench_kv errors "$res")" -v u="$((u1 - u0))" -v s="$((s1 - s0))" \
			    -v hz="$HZ" -v rss="$rss" -v o="$other" -v ns="$((ns1 - ns0))" 'BEGIN {
				cpu = ns / 1000 / (n > 0 ? n : 1)
				us = (u + s > 0 ? cpu / (u + s) : 0)
				printf "%s\t%d\t%.0f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%d\n",
				    p, r, n / (d / 1e6), p50, p99, cpu, u * us, s * us,
				    rss / 1024, e, o }' >"$TMP/run.tsv"
			awk -F'\t' '{ printf "# round %d %-9s %7d req/s  p50 %5d us  p99 %6d us  %6.2f us/req CPU  %5.1f MiB  %d errors  other %d%%\n", $2, $1, $3, $4, $5, $6, $9, $10, $11 }' "$TMP/run.tsv" >&2
			[ "$other" -le "$MAX_OTHER" ] && break
			if [ "$attempt" -lt "$RETRIES" ]; then
				log "other work took ${other}% of the CPUs (> MAX_OTHER=$MAX_OTHER): run again"
			fi
		done
		cat "$TMP/run.tsv" >>"$runs"
	done
done

# --- report --------------------------------------------------------------
echo
echo "### ringproxy vs HAProxy vs NGINX"
echo
echo "$ROUNDS rounds x ${SECS} s, order rotated per round; wrk -t$WRK_THREADS -c$CONNS${WRK_ARGS:+ $WRK_ARGS}," \
     "$URLS URLs, ${SIZE} B bodies; $WORKERS workers/threads each;" \
     "4 testcaches (--threads $TC_THREADS); $(nproc) CPUs shared by all. Medians over rounds."
echo
echo "| proxy | req/s | p50 ms | p99 ms | CPU µs/req | user µs/req | sys µs/req | RSS MiB | errors | other CPU % (max) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
declare -A med
for p in $PROXIES; do
	for c in 3 4 5 6 7 8 9 10; do med[$p.$c]=$(bench_median "$runs" "$p" $c); done
	omax=$(awk -F'\t' -v p="$p" '$1 == p && $11 > m { m = $11 } END { print m + 0 }' "$runs")
	awk -v p="$p" -v a="${med[$p.3]}" -v b="${med[$p.4]}" -v c="${med[$p.5]}" \
	    -v d="${med[$p.6]}" -v e="${med[$p.7]}" -v f="${med[$p.8]}" \
	    -v g="${med[$p.9]}" -v h="${med[$p.10]}" -v o="$omax" 'BEGIN {
		printf "| %s | %.0f | %.3f | %.3f | %.2f | %.2f | %.2f | %.1f | %d | %d |\n",
		    p, a, b / 1000, c / 1000, d, e, f, g, h, o }'
done
if [[ " $PROXIES " == *" ringproxy "* && " $PROXIES " == *" haproxy "* ]]; then
	echo
	echo "| ringproxy / HAProxy | ratio | goal | met |"
	echo "|---|---:|---:|:-:|"
	awk -v r="${med[ringproxy.3]}" -v h="${med[haproxy.3]}" 'BEGIN {
		x = r / h; printf "| req/s | %.2f | >= 1.10 | %s |\n", x, (x >= 1.1 ? "yes" : "no") }'
	awk -v r="${med[ringproxy.6]}" -v h="${med[haproxy.6]}" 'BEGIN {
		x = r / h; printf "| CPU per request | %.2f | <= 0.90 | %s |\n", x, (x <= 0.9 ? "yes" : "no") }'
	awk -v r="${med[ringproxy.5]}" -v h="${med[haproxy.5]}" 'BEGIN {
		x = r / h; printf "| p99 latency | %.2f | <= 1.00 | %s |\n", x, (x <= 1.0 ? "yes" : "no") }'
fi
if [[ " $PROXIES " == *" ringproxy "* && " $PROXIES " == *" before "* ]]; then
	echo
	echo "| ringproxy (this build) / before ($BASE) | ratio |"
	echo "|---|---:|"
	awk -v r="${med[ringproxy.3]}" -v h="${med[before.3]}" 'BEGIN { printf "| req/s | %.3f |\n", r / h }'
	awk -v r="${med[ringproxy.6]}" -v h="${med[before.6]}" 'BEGIN { printf "| CPU per request | %.3f |\n", r / h }'
	awk -v r="${med[ringproxy.5]}" -v h="${med[before.5]}" 'BEGIN { printf "| p99 latency | %.3f |\n", r / h }'
	awk -v r="${med[ringproxy.9]}" -v h="${med[before.9]}" 'BEGIN { printf "| RSS | %.3f |\n", (h > 0 ? r / h : 0) }'
fi
echo
echo "<details><summary>every run</summary>"
echo
echo "| proxy | round | req/s | p50 µs | p99 µs | CPU µs/req | user | sys | RSS MiB | errors | other CPU % |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '{ printf "| %s |", $1; for (i = 2; i <= NF; i++) printf " %s |", $i; print "" }' "$runs"
echo
echo "</details>"

# --- profile (PROFILE=1) -----------------------------------------------------
# strace -c counts every syscall of every thread while wrk runs PROF_SECS s;
# syscalls per request = total / requests wrk completed in that window (strace
# slows the proxy, so this counts calls, not time).
[ "$PROFILE" = 1 ] || exit 0
set +o pipefail   # `perf report | head` ends perf with SIGPIPE; that is fine
profile_strace() {
	local p=$1 res n
	command -v strace >/dev/null || { log "no strace"; return 0; }
	read -r -a pp <<<"$(proxy_pids "$p")"
	local args=()
	bench_quiet
	for x in "${pp[@]}"; do args+=(-p "$x"); done
	timeout -s INT $((PROF_SECS + 3)) strace -c -f -o "$TMP/strace-$p.txt" "${args[@]}" 2>/dev/null &
	local st=$!
	PIDS+=($st)
	sleep 1
	res=$(run_wrk "${pport[$p]}" "$PROF_SECS")
	wait "$st" 2>/dev/null || true
	n=$(bench_kv requests "$res")
	echo
	echo "#### $p: syscalls per request under strace ($n requests in ${PROF_SECS} s)"
	echo
	echo '```'
	awk -v n="$n" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" {
		printf "%-16s %8.3f /req  (%s%% of syscall time)\n", $NF, $4 / n, $1; t += $4 }
	    END { printf "%-16s %8.3f /req\n", "TOTAL", t / n }' "$TMP/strace-$p.txt" |
	    sort -k2 -gr
	echo '```'
}
for p in ringproxy haproxy; do
	[[ " $PROXIES " == *" $p "* ]] && profile_strace "$p"
done
if [[ " $PROXIES " == *" ringproxy "* ]] && command -v perf >/dev/null; then
	bench_quiet
	timeout -s INT $((PROF_SECS + 3)) perf record -q -e cpu-clock -F 1999 -g \
	    -o "$TMP/perf.data" -p "${ppid[ringproxy]}" >/dev/null 2>&1 &
	st=$!
	PIDS+=($st)
	sleep 1
	run_wrk "$RP_PORT" "$PROF_SECS" >/dev/null
	wait "$st" 2>/dev/null || true
	echo
	echo "#### ringproxy: perf (cpu-clock), self time by object, then by symbol"
	echo
	echo '```'
	perf report -i "$TMP/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null |
	    grep -v '^#' | grep -v '^$' | head -8
	echo
	perf report -i "$TMP/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
	    grep -v '^#' | grep -v '^$' | head -40
	echo '```'
fi
