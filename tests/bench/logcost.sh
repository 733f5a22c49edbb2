#!/bin/bash
# tests/bench/logcost.sh -- what the access log costs a request, counted in
# instructions (callgrind), so the figure does not move with the machine's
# load: wall-clock and CPU time on a shared 2-core box move by more than
# the few hundred nanoseconds measured here.
#
# Usage (from the source tree):
#   bash tests/bench/logcost.sh [BUILD_DIR]       # default: build-rel
#   N=2000 MODES="off combined json" bash tests/bench/logcost.sh build-rel
#
# For each mode (off: [log] access = off; combined, json: access_format,
# written to a file) it starts 4 testcaches and ringproxy (1 worker, cache
# off so every request goes through a backend) under valgrind's callgrind,
# sends W warm-up requests, zeroes the counters, sends N requests with
# distinct URLs on one keep-alive connection (curl's URL globbing, with a
# Referer and curl's User-Agent), dumps the counters and prints the
# instructions (Ir) of the worker thread divided by N. The difference
# between two modes is the log's cost per request; the functions that
# differ most are listed with CALLERS=1 (callgrind_annotate).
#
# Environment: N [2000], W [200], MODES ["off combined json"], KEEP [0],
# BARE [0] (1: requests without Referer and User-Agent, as wrk sends them
# in compare.sh), CLOSE [0] (1: a connection per request, Connection:
# close, so the accept path counts too), PROXY [0] (1: [proxy]
# proxy_protocol = on from 127.0.0.1 and curl's --haproxy-protocol, a v1
# header on every connection), CALLERS [0] (1: the functions of each mode
# by their own instructions; KEEPDIR: where to copy the profiles).
# Every process it starts is stopped by its PID on exit.
set -euo pipefail

N=${N:-2000}
W=${W:-200}
MODES=${MODES:-off combined json}
NCACHES=4

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init logcost
command -v valgrind >/dev/null || { echo "logcost.sh: needs valgrind" >&2; exit 1; }

bench_caches 1 "$NCACHES" --size 4096
for i in $(seq $NCACHES); do bench_wait_http "${PORTS[i]}" /__stats; done

if [ "${BARE:-0}" = 1 ]; then
	HDRS=(-H "User-Agent:" -H "Accept:")
else
	HDRS=(-e "https://example.com/page?a=1")
fi
[ "${CLOSE:-0}" = 1 ] && HDRS+=(-H "Connection: close")
[ "${PROXY:-0}" = 1 ] && HDRS+=(--haproxy-protocol)

# run MODE: prints "MODE IR_PER_REQUEST"
run() {
	local mode=$1 port pid out tid f
	port=$(bench_free_ports 1)
	{
		printf '[proxy]\nlisten = 127.0.0.1:%s\nworkers = 1\nlog_level = warn\n' "$port"
		[ "${PROXY:-0}" = 1 ] && printf 'proxy_protocol = on\nproxy_protocol_from = 127.0.0.1\n'
		printf '[ring]\nvnodes = 160\n[cache]\nsize = 0\n'
		for i in $(seq $NCACHES); do
			printf '[backend cache-%s]\nurl = http://127.0.0.1:%s\n' "$i" "${PORTS[i]}"
		done
		if [ "$mode" != off ]; then
			printf '[log]\naccess = %s\naccess_format = %s\n' "$TMP/access-$mode.log" "$mode"
		fi
	} >"$TMP/$mode.ini"
	out=$TMP/cg-$mode
	mkdir -p "$out"
	valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg.%p" \
	    "$RP" -c "$TMP/$mode.ini" >"$TMP/$mode.out" 2>&1 &
	pid=$!
	PIDS+=($pid)
	for _ in $(seq 300); do
		curl -s -o /dev/null --max-time 2 "${HDRS[@]}" "http://127.0.0.1:$port/" && break
		kill -0 "$pid" 2>/dev/null || { cat "$TMP/$mode.out" >&2; exit 1; }
		sleep 0.2
	done
	timeout 300 curl -s "${HDRS[@]}" \
	    "http://127.0.0.1:$port/warm/[1-$W]/x_200x200.jpg" >/dev/null
	callgrind_control -z "$pid" >/dev/null
	timeout 600 curl -s "${HDRS[@]}" \
	    "http://127.0.0.1:$port/thumbs/[1-$N]/[1-1]_200x200.jpg?w=200&h=200" >/dev/null
	callgrind_control -d "$pid" >/dev/null
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	# the worker: the thread with the most instructions in the dump
	best=0
	# only the dump taken after zeroing counts: cg.PID.1-TT, one file a
	# thread (the one at exit is cg.PID-TT)
	for f in "$out"/cg.*.1-[0-9]*; do
		[ -e "$f" ] || continue
		ir=$(awk '/^summary:/ { print $2 }' "$f")
		[ -n "$ir" ] || continue
		if [ "$ir" -gt "$best" ]; then best=$ir; tid=$f; fi
	done
	awk -v m="$mode" -v ir="$best" -v n="$N" 'BEGIN { printf "%-9s %9.0f Ir/request\n", m, ir / n }' |
	    tee -a "$TMP/results"
	if [ "${CALLERS:-0}" = 1 ]; then
		callgrind_annotate --inclusive=no "$tid" 2>/dev/null | sed -n '1,40p' >"$TMP/annotate-$mode.txt"
		cp "$tid" "${KEEPDIR:-/tmp}/logcost-$mode.cg" 2>/dev/null || true
	fi
}

echo "# $N requests per mode (after $W warm-up), 1 worker, cache off; instructions of the worker thread"
for m in $MODES; do run "$m"; done
awk '$1 == "off" { off = $2 } { v[$1] = $2; o[NR] = $1 }
     END { if (off != "") for (i = 1; i <= NR; i++) if (o[i] != "off")
	printf "%-9s %+9.0f Ir/request over off\n", o[i], v[o[i]] - off }' "$TMP/results"
if [ "${CALLERS:-0}" = 1 ]; then
	for m in $MODES; do echo "## $m"; cat "$TMP/annotate-$m.txt"; done
fi
