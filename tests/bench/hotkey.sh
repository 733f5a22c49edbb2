#!/bin/bash
# tests/bench/hotkey.sh -- issue 5: one hot key carrying half of the
# requests, the rest spread over 100k URLs, 64 wrk connections, every
# request delayed a few ms at the cache so that in-flight counts build up.
# Runs ringproxy with balance_factor 0, 1.25 and 2, and HAProxy 2.6 with
# balance uri + hash-type consistent + hash-balance-factor 125, one after
# the other against the same 4 test caches (--threads 1), and prints a
# Markdown table: req/s, and per backend the peak in-flight count (the
# cache's own max_inflight) and the mean of samples of /__stats inflight
# taken every 50 ms. The goal of bounded loads (Mirrokni, Thorup,
# Zadimoghaddam, arXiv:1608.01350) is checked per run: peak <= c x average
# + 1, the average being the proxy's 64 requests in flight over 4 backends
# (the caches' sampled mean is lower: part of each request's life is
# spent in the proxy and in wrk, not at a cache).
#
# The proxy's /stats give the share of requests sent to a non-owner
# (spilled_in) and how many of them were for a hot key (spilled_hot).
# BASE=DIR (a build directory of another revision, e.g. one made with
# `git worktree`/`git archive` of main before a change) adds its rows at
# c = 1.25 and 2 to the same table, for a before/after in one run.
#
# usage: bash tests/bench/hotkey.sh [SECONDS] [DELAY_MS]   (default 10, 5)
set -euo pipefail

SECS=${1:-10}
DELAY=${2:-5}
CONNS=64
THREADS=$(nproc)
[ "$THREADS" -gt 4 ] && THREADS=4

. "$(dirname "$0")/lib.sh"
bench_init hotkey
cd "$ROOT"
bench_caches 0 3 --threads 1

cat >"$TMP/hot.lua" <<EOF
-- half of the requests hit one URL, the rest spread over 100k URLs
local n = 0
function setup(thread) n = n + 1; thread:set("seed", n) end
function init(args) math.randomseed(seed * 7919) end
function request()
	if math.random() < 0.5 then
		return wrk.format("GET", "/hot/viral.jpg?delay=$DELAY")
	end
	return wrk.format("GET", "/t/" .. math.random(100000) .. ".jpg?delay=$DELAY")
end
EOF

# Sample every cache's /__stats inflight every 50 ms for SECS seconds, then
# read its max_inflight; prints "name peak mean samples" per cache.
cat >"$TMP/sample.py" <<'EOF'
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
EOF

start_rp() {    # balance_factor [binary] -> listening port in $LPORT, admin in $APORT
	local conf=$TMP/rp-$1.ini bin=${2:-$RP}
	read -r APORT <<<"$(bench_free_ports 1)"
	{
		printf '[proxy]\nlisten = 127.0.0.1:0\nworkers = %s\nlog_level = info\n' "$THREADS"
		printf 'admin_listen = 127.0.0.1:%s\n' "$APORT"
		# the proxy's own cache would answer the hot key itself
		printf '[cache]\nsize = 0\n'
		printf '[ring]\nvnodes = 160\nbalance_factor = %s\n' "$1"
		for i in 0 1 2 3; do
			printf '[backend cache-%s]\nurl = http://127.0.0.1:%s\n' "$i" "${PORTS[$i]}"
		done
	} >"$conf"
	"$bin" -c "$conf" 2>"$TMP/rp-$1.log" &
	PIDS+=($!)
	for _ in $(seq 200); do
		LPORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/rp-$1.log")
		[ -n "$LPORT" ] && return 0
		sleep 0.05
	done
	echo "hotkey.sh: ringproxy did not start:" >&2
	cat "$TMP/rp-$1.log" >&2
	return 1
}

# "requests spilled_in spilled_hot" summed over the backends, or "- - -"
# (HAProxy)
rp_counts() {
	[ -n "${APORT:-}" ] || { echo "- - -"; return; }
	curl -s "http://127.0.0.1:$APORT/stats" | python3 -c '
import json, sys
b = json.load(sys.stdin)["backends"]
print(sum(x["requests"] for x in b), sum(x["spilled_in"] for x in b),
      sum(x.get("spilled_hot", 0) for x in b))'
}

start_haproxy() {
	local conf=$TMP/haproxy.cfg
	LPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	APORT=
	{
		printf 'global\n  nbthread %s\n  maxconn 4096\n' "$THREADS"
		printf 'defaults\n  mode http\n  timeout connect 1s\n  timeout client 30s\n  timeout server 30s\n'
		printf 'frontend fe\n  bind 127.0.0.1:%s\n  default_backend caches\n' "$LPORT"
		printf 'backend caches\n  balance uri\n  hash-type consistent\n  hash-balance-factor 125\n'
		for i in 0 1 2 3; do
			printf '  server cache-%s 127.0.0.1:%s\n' "$i" "${PORTS[$i]}"
		done
	} >"$conf"
	haproxy -f "$conf" -db >"$TMP/haproxy.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $LPORT), 1)" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "hotkey.sh: haproxy did not start:" >&2
	cat "$TMP/haproxy.log" >&2
	return 1
}

stop_last() {
	local p=${PIDS[-1]}
	kill "$p"
	wait "$p" 2>/dev/null || true
	unset 'PIDS[-1]'
}

ROWS=()
FAILS=0
run() {         # label c
	local label=$1 c=$2 out rps samples peak sum goal ok
	for p in "${PORTS[@]}"; do curl -s "http://127.0.0.1:$p/__reset" >/dev/null; done
	python3 "$TMP/sample.py" "$SECS" "${PORTS[@]}" >"$TMP/samples" &
	local sp=$!
	out=$(wrk -t "$THREADS" -c "$CONNS" -d "${SECS}s" --timeout 5s -s "$TMP/hot.lua" \
		"http://127.0.0.1:$LPORT/")
	wait "$sp"
	local req spilled hot share
	read -r req spilled hot <<<"$(rp_counts)"
	if [ "$req" = - ]; then
		share="n/a"
	else
		share=$(awk -v a="$spilled" -v b="$req" -v h="$hot" 'BEGIN{printf "%.1f%% (%.1f%% hot)", b ? 100*a/b : 0, b ? 100*h/b : 0}')
	fi
	rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
	local errs
	errs=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
	samples=$(awk '{printf "%s%s/%s", (NR>1?" · ":""), $2, $3}' "$TMP/samples")
	peak=$(awk 'BEGIN{m=0} {if ($2>m) m=$2} END{print m}' "$TMP/samples")
	sum=$(awk '{s+=$3} END{printf "%.2f", s/NR}' "$TMP/samples")
	local avg=$((CONNS / 4))
	goal=$(awk -v c="$c" -v m="$avg" 'BEGIN{printf "%.1f", c*m+1}')
	if [ "$c" = 0 ]; then
		ok="n/a (off; vs 1.25: $(awk -v m="$avg" -v p="$peak" 'BEGIN{print (p <= 1.25*m+1) ? "met" : "missed"}'))"
	elif awk -v p="$peak" -v g="$goal" 'BEGIN{exit !(p <= g)}'; then
		ok="met"
	else
		ok="**missed**"
		FAILS=$((FAILS + 1))
	fi
	ROWS+=("| $label | $rps | $samples | $sum | $peak | $goal | $ok | $share | ${errs:-none} |")
}

for c in 0 1.25 2; do
	start_rp "$c"
	run "ringproxy balance_factor=$c" "$c"
	stop_last
	if [ -n "${BASE:-}" ] && [ "$c" != 0 ]; then
		ninja -C "$BASE" >/dev/null
		start_rp "$c" "$BASE/src/ringproxy"
		run "base ($(basename "$BASE")) balance_factor=$c" "$c"
		stop_last
	fi
done
start_haproxy
run "HAProxy 2.6 uri consistent, hash-balance-factor 125" 1.25
stop_last

echo
echo "hot key: half of the requests on one URL, the rest over 100k URLs; ${DELAY} ms at the cache;"
echo "wrk -t$THREADS -c$CONNS -d${SECS}s; proxies with $THREADS threads; 4 testcaches (--threads 1);"
echo "in flight per cache as peak/mean (peak = the cache's max_inflight, mean of 50 ms samples)"
echo
echo "| run | req/s | cache-0 · cache-1 · cache-2 · cache-3 in flight peak/mean | sampled mean per cache | max peak | c×(64/4)+1 | goal | to a non-owner (of all requests: hot) | errors |"
echo "|---|---:|---|---:|---:|---:|---|---|---|"
printf '%s\n' "${ROWS[@]}"
exit $((FAILS > 0))
