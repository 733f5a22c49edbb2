#!/bin/bash
# tests/bench/fleet.sh -- bounded loads in a fleet: each ringproxy counts
# only its own requests in flight. The hot-key load of hotkey.sh (half of
# the requests on one URL, the rest over 100k URLs, DELAY ms at the cache,
# 64 connections in all) sent to one proxy, then split over two proxies
# started from the same file (32 connections each, as an L4 balancer or
# DNS would split them). Per cache: the peak in-flight count (the cache's
# own max_inflight) and the mean of 50 ms samples. The single-proxy goal
# is c x 64/4 + 1; with N proxies each caps a cache at ceil(c x (own
# in flight + 1) x w/W), so the fleet's bound is N x ceil(c x (64/N + 1)/4).
#
# usage: bash tests/bench/fleet.sh [SECONDS] [DELAY_MS] [C]   (default 10, 5, 1.25)
set -euo pipefail

SECS=${1:-10}
DELAY=${2:-5}
C=${3:-1.25}
CONNS=64

. "$(dirname "$0")/lib.sh"
bench_init fleet
cd "$ROOT"
bench_caches 0 3 --threads 1

cat >"$TMP/hot.lua" <<LUA
local n = 0
function setup(thread) n = n + 1; thread:set("seed", n) end
function init(args) math.randomseed(seed * 7919) end
function request()
	if math.random() < 0.5 then
		return wrk.format("GET", "/hot/viral.jpg?delay=$DELAY")
	end
	return wrk.format("GET", "/t/" .. math.random(100000) .. ".jpg?delay=$DELAY")
end
LUA

cat >"$TMP/sample.py" <<'PY'
import http.client, json, sys, time
secs, ports = float(sys.argv[1]), [int(p) for p in sys.argv[2:]]
conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=5) for p in ports]
def stats(i):
    conns[i].request("GET", "/__stats")
    return json.loads(conns[i].getresponse().read())
sums, n = [0] * len(ports), 0
end = time.monotonic() + secs
while time.monotonic() < end:
    t = time.monotonic()
    for i in range(len(ports)):
        sums[i] += stats(i)["inflight"]
    n += 1
    time.sleep(max(0, 0.05 - (time.monotonic() - t)))
for i in range(len(ports)):
    s = stats(i)
    print(s["name"], s["max_inflight"], f"{sums[i] / max(n, 1):.2f}", n)
PY

CONF=$TMP/fleet.ini
{
	printf '[proxy]\nlisten = 127.0.0.1:0\nworkers = 1\n'
	printf '[ring]\nvnodes = 160\nbalance_factor = %s\n' "$C"
	for i in 0 1 2 3; do
		printf '[backend cache-%s]\nurl = http://127.0.0.1:%s\n' "$i" "${PORTS[$i]}"
	done
} >"$CONF"

start_rp() {    # tag -> the port in $LPORT (the same file every time)
	"$RP" -c "$CONF" 2>"$TMP/rp-$1.log" &
	PIDS+=($!)
	for _ in $(seq 200); do
		LPORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/rp-$1.log")
		[ -n "$LPORT" ] && return 0
		sleep 0.05
	done
	echo "fleet.sh: ringproxy did not start:" >&2
	cat "$TMP/rp-$1.log" >&2
	return 1
}

ROWS=()
run() {         # label proxies... (ports): CONNS split evenly over them
	local label=$1 n=$(($# - 1)) p out rps=0 samples peak wpids=()
	shift
	for p in "${PORTS[@]}"; do curl -s "http://127.0.0.1:$p/__reset" >/dev/null; done
	python3 "$TMP/sample.py" "$SECS" "${PORTS[@]}" >"$TMP/samples" &
	local sp=$!
	for p in "$@"; do
		wrk -t1 -c $((CONNS / n)) -d "${SECS}s" --timeout 5s -s "$TMP/hot.lua" \
			"http://127.0.0.1:$p/" >"$TMP/wrk-$p.out" &
		wpids+=($!)
	done
	for p in "${wpids[@]}"; do wait "$p"; done
	wait "$sp"
	for p in "$@"; do
		rps=$(awk -v r="$rps" '/^Requests\/sec/ {r += $2} END {printf "%.0f", r}' "$TMP/wrk-$p.out")
	done
	samples=$(awk '{printf "%s%s/%s", (NR>1?" · ":""), $2, $3}' "$TMP/samples")
	peak=$(awk 'BEGIN{m=0} {if ($2>m) m=$2} END{print m}' "$TMP/samples")
	local bound
	bound=$(awk -v c="$C" -v n="$n" -v t="$CONNS" 'function ceil(x){return x==int(x)?x:int(x)+1}
		BEGIN{print n * ceil(c * (t / n + 1) / 4)}')
	ROWS+=("| $label | $rps | $samples | $peak | $bound |")
}

start_rp one
ONE=$LPORT
run "one proxy, 64 connections" "$ONE"
start_rp two
TWO=$LPORT
run "two proxies, 32 connections each" "$ONE" "$TWO"

echo
echo "hot key: half of the requests on one URL, the rest over 100k URLs; ${DELAY} ms at the cache;"
echo "wrk -c$CONNS in all for ${SECS}s; ringproxy workers = 1 each, balance_factor = $C, the same file;"
echo "4 testcaches (--threads 1); in flight per cache as peak/mean (50 ms samples)"
echo
echo "| run | req/s | cache-0 · cache-1 · cache-2 · cache-3 in flight peak/mean | max peak | bound N×ceil(c×(64/N+1)/4) |"
echo "|---|---:|---|---:|---:|"
printf '%s\n' "${ROWS[@]}"
