#!/bin/bash
# tests/bench/missinstr.sh -- what a load with no hits costs per request,
# counted in instructions (valgrind's callgrind), so the figure holds on a
# busy machine where wall-clock and CPU time do not.
#
# Usage (from the source tree):
#   bash tests/bench/missinstr.sh [BUILD_DIR]       # default: build-rel
#   CONFIGS="0 64m 64m:1" N=3000 bash tests/bench/missinstr.sh
#   URLS=128000 CONFIGS="0 8m" WARM_N=60000 N=5000 bash tests/bench/missinstr.sh
#   URLS=1 DIR=thumbs LEAF=1_200x200.jpg CONFIGS="0 64m" bash tests/bench/missinstr.sh
#
# Environment (defaults in brackets):
#   CONFIGS ["0 64m 64m:1"]  one run each: [cache] size, and after a colon
#                  its min_uses (none: the default)
#   N [3000], WARM_N [500]   measured and unmeasured requests
#   SIZE [4096]    body bytes (testcache --size)
#   URLS [0]       0: every URL new (one-hit wonders); K: each request's URL
#                  drawn uniformly from K (a fixed seed per phase, the same
#                  for every config): a long tail that repeats, mostly too
#                  rarely to hit. Give WARM_N enough requests to fill the
#                  cache, so what is measured is its steady state.
#   DIR [t], LEAF [x.jpg]  the URL is /DIR/<i>/LEAF with URLS (with 0, DIR
#                  is the phase's own); DIR=thumbs LEAF=1_200x200.jpg gives
#                  floor.sh's thumbnail path, /thumbs/1/1_200x200.jpg
#
# Per config: one testcache, the proxy (one worker) under
# `valgrind --tool=callgrind`, WARM_N keep-alive GETs like wrk's (Host
# only), the counters zeroed (callgrind_control -z), N more GETs, a dump
# (callgrind_control -d); every URL is new, so every request misses (or,
# with URLS, drawn from a set). It prints the proxy's instructions per
# measured request (all its threads, user space), and from its /stats the
# measured requests' hits and stores per 100. Every load is bounded by
# `timeout`; every process started is stopped by PID.
set -euo pipefail

CONFIGS=${CONFIGS:-0 64m 64m:1}
N=${N:-3000}
WARM_N=${WARM_N:-500}
SIZE=${SIZE:-4096}
URLS=${URLS:-0}
DIR=${DIR:-t}
LEAF=${LEAF:-x.jpg}

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init missinstr
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
	{ echo "missinstr.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }

bench_caches 1 1 --size "$SIZE"
bench_wait_http "${PORTS[1]}" /__stats

# load PORT N PREFIX SEED: N keep-alive GETs of /PREFIX/<i>/LEAF, each
# new; with URLS, of /DIR/<i>/LEAF with i drawn from URLS (seeded)
load() {
	timeout 1800 python3 - "$@" "$URLS" "$DIR" "$LEAF" <<'PY'
import random, re, socket, sys
port, n, prefix, seed, urls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
dirname, leaf = sys.argv[6], sys.argv[7].encode()
rnd = random.Random(seed)
s = socket.create_connection(("127.0.0.1", port), timeout=30)
buf = b""
for i in range(n):
    if urls:
        prefix, i = dirname, rnd.randrange(urls)
    s.sendall(b"GET /%s/%d/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (prefix.encode(), i, leaf, port))
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            sys.exit("connection closed")
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit("unexpected " + head[:40].decode(errors="replace"))
    cl = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
    while len(buf) < cl:
        buf += s.recv(65536)
    buf = buf[cl:]
PY
}

# cache_stat PORT: "hits stores" from the admin listener's /stats
cache_stat() {
	curl -s --max-time 60 "http://127.0.0.1:$1/stats" |
	    python3 -c 'import json,sys; c=json.load(sys.stdin).get("cache",{}); print(c.get("hits",0), c.get("stores",0))'
}

echo "| [cache] | instructions / request | hits / 100 requests | stores / 100 requests |"
echo "|---|---:|---:|---:|"
for cfg in $CONFIGS; do
	size=${cfg%%:*}; mu=
	[[ $cfg == *:* ]] && mu=${cfg#*:}
	read -r port aport <<<"$(bench_free_ports 2)"
	{
		printf '[proxy]\nlisten = 127.0.0.1:%s\nadmin_listen = 127.0.0.1:%s\nworkers = 1\nlog_level = warn\n' \
		    "$port" "$aport"
		printf '[health]\npassive = off\n[backend cache-1]\nurl = http://127.0.0.1:%s\n' "${PORTS[1]}"
		printf '[cache]\nsize = %s\n' "$size"
		[ -n "$mu" ] && printf 'min_uses = %s\n' "$mu"
	} >"$TMP/rp.ini"
	rm -f "$TMP"/cg.out*
	valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$RP" -c "$TMP/rp.ini" \
	    >"$TMP/rp.log" 2>&1 &
	pid=$!
	PIDS+=($pid)
	for _ in $(seq 300); do
		curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/__up" && break
		sleep 0.1
	done
	load "$port" "$WARM_N" "w$size$mu" 1
	read -r h0 s0 <<<"$(cache_stat "$aport")"
	callgrind_control -z "$pid" >/dev/null 2>&1
	load "$port" "$N" "m$size$mu" 2
	callgrind_control -d "$pid" >/dev/null 2>&1
	read -r h1 s1 <<<"$(cache_stat "$aport")"
	sleep 0.5
	kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
	ir=$(cat "$TMP"/cg.out* | awk '/^summary:/ { s += $2 } END { printf "%.0f", s }')
	echo "| size = $size${mu:+, min_uses = $mu} | $((ir / N)) |" \
	    "$(awk -v a=$((h1 - h0)) -v n="$N" 'BEGIN { printf "%.1f", 100 * a / n }') |" \
	    "$(awk -v a=$((s1 - s0)) -v n="$N" 'BEGIN { printf "%.1f", 100 * a / n }') |"
done
