#!/usr/bin/env bash
# tests/bench/reload.sh -- what SIGHUP reloads cost the requests in flight
# (issue 6). A release ringproxy (build-rel, brought up to date) in front of 4
# test caches on 127.0.0.1; wrk -c64 for DURATION seconds in steady state,
# then again while a loop sends SIGHUP 10 times a second, alternating two
# files: CHANGE=remove (default) a 4-backend and a 3-backend one (the
# caches left then carry a third more load each), CHANGE=timeout two that
# route alike (only client_timeout differs: the cost of reloading itself). Prints a Markdown table of p50/p99 and
# their ratio (goal: during/steady <= 1.2x).
#
# Steady and reloading runs alternate ROUNDS times (medians reported), so
# that other load on the machine affects both sides alike; during the steady
# runs the same loop runs but sends SIGWINCH (ignored) instead of SIGHUP.
#
# usage: tests/bench/reload.sh [DURATION_SECONDS]   (default 10; env WORKERS=2, CONNS=64, ROUNDS=3, CHANGE=remove)
set -euo pipefail

DUR=${1:-10}
WORKERS=${WORKERS:-2}
CONNS=${CONNS:-64}
ROUNDS=${ROUNDS:-3}
CHANGE=${CHANGE:-remove}
. "$(dirname "$0")/lib.sh"
bench_init reload

wait_for() { # FILE PATTERN SECONDS
	local i
	for ((i = 0; i < $3 * 100; i++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.01
	done
	echo "reload.sh: timed out waiting for '$2' in $1" >&2
	exit 1
}

bench_caches 1 4

conf() { # N_BACKENDS
	printf '[proxy]\nlisten = 127.0.0.1:0\nworkers = %s\n\n[ring]\nvnodes = 160\n' "$WORKERS"
	for ((i = 1; i <= $1; i++)); do
		printf '\n[backend cache-%d]\nurl = http://127.0.0.1:%s\n' "$i" "${PORTS[i]}"
	done
}
conf 4 >"$TMP/a.ini"
case "$CHANGE" in
remove) conf 3 >"$TMP/b.ini" ;;       # cache-4 leaves and comes back: 25% of keys move
timeout) conf 4 | sed 's/^workers = .*/&\nclient_timeout = 31s/' >"$TMP/b.ini" ;; # routing unchanged
*) echo "reload.sh: CHANGE=remove|timeout" >&2; exit 2 ;;
esac
ln -s "$TMP/a.ini" "$TMP/live.ini"

"$RP" -c "$TMP/live.ini" 2>"$TMP/rp.log" &
RPID=$!
PIDS+=($RPID)
wait_for "$TMP/rp.log" "listening on" 10
PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) with.*/\1/p' "$TMP/rp.log" | head -1)

# 10,000 distinct thumbnails, round-robin: keys spread over every cache
cat >"$TMP/urls.lua" <<'EOF'
local n = 0
request = function()
	n = (n + 1) % 10000
	return wrk.format("GET", "/thumb/" .. n .. ".jpg?size=4096")
end
EOF

run_wrk() { # OUT
	wrk -t2 -c"$CONNS" -d"${DUR}s" --latency -s "$TMP/urls.lua" "http://127.0.0.1:$PORT/" >"$1"
}

sig_loop() { # SIGNAL: 10 times a second, bounded: DUR*10 + 20 signals
	for ((k = 0; k < DUR * 10 + 20; k++)); do
		if ((k % 2 == 0)); then t=b; else t=a; fi
		ln -sfn "$TMP/$t.ini" "$TMP/live.new" && mv -T "$TMP/live.new" "$TMP/live.ini"
		kill -"$1" "$RPID" 2>/dev/null || exit 0
		sleep 0.1
	done
}

# warm-up (pools, caches); then ROUNDS pairs of steady / reloading runs,
# interleaved so that drift in the machine's load hits both alike
wrk -t2 -c"$CONNS" -d2s -s "$TMP/urls.lua" "http://127.0.0.1:$PORT/" >/dev/null
base=$(grep -c "info: reload [0-9]*:" "$TMP/rp.log" || true)
# the main thread (task id = pid) does the reloading and no request work
main_ticks() { awk '{ print $14 + $15 }' "/proc/$RPID/task/$RPID/stat"; }
ticks0=$(main_ticks)
for ((r = 1; r <= ROUNDS; r++)); do
	# the steady run has the same loop, swapping the file too, but
	# sends SIGWINCH, which ringproxy ignores: the loop's own cost (fork,
	# exec on a busy machine) then weighs on both sides alike
	sig_loop WINCH &
	HUPS=$!
	PIDS+=($HUPS)
	run_wrk "$TMP/steady-$r.txt"
	kill "$HUPS" 2>/dev/null || true
	wait "$HUPS" 2>/dev/null || true
	sig_loop HUP &
	HUPS=$!
	PIDS+=($HUPS)
	run_wrk "$TMP/reload-$r.txt"
	kill "$HUPS" 2>/dev/null || true
	wait "$HUPS" 2>/dev/null || true
	sleep 0.3
done
reloads=$(( $(grep -c "info: reload [0-9]*:" "$TMP/rp.log" || true) - base ))
ticks=$(( $(main_ticks) - ticks0 ))
failed=$(grep -c "reload failed" "$TMP/rp.log" || true)

# wrk prints "50%  1.23ms": convert to microseconds
pct() { # FILE PERCENT
	awk -v p="$2%" '$1 == p {
		v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
		if (u == "us") m = 1; else if (u == "ms") m = 1000; else if (u == "s") m = 1000000; else m = 60000000
		printf "%.0f", v * m }' "$1"
}
rps() { awk '/^Requests\/sec/ { printf "%.0f", $2 }' "$1"; }
errs() { # non-2xx + socket errors
	awk '/Non-2xx/ { n += $NF } /Socket errors/ { gsub(/,/, ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' "$1"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
over() { # KIND FUNCTION ARG...: the median over rounds
	local kind=$1 f=$2; shift 2
	for ((r = 1; r <= ROUNDS; r++)); do "$f" "$TMP/$kind-$r.txt" "$@"; echo; done | median
}
sum_errs() { local n=0 r; for ((r = 1; r <= ROUNDS; r++)); do n=$((n + $(errs "$TMP/$1-$r.txt"))); done; echo $n; }
s50=$(over steady pct 50); s99=$(over steady pct 99); r50=$(over reload pct 50); r99=$(over reload pct 99)
a=$(over steady rps); b=$(over reload rps)

echo "ringproxy reload benchmark: CHANGE=$CHANGE, $WORKERS workers, 4 test caches, wrk -t2 -c$CONNS -d${DUR}s x $ROUNDS rounds each (medians), $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg)"
awk -v t="$ticks" -v n="$reloads" -v hz="$(getconf CLK_TCK)" 'BEGIN {
	printf "main thread CPU per reload: %.2f ms (%d ticks over %d reloads)\n", n ? 1000 * t / hz / n : 0, t, n }'
echo "reloads during the reloading runs: $reloads ($failed failed); errors (non-2xx + socket): steady $(sum_errs steady), reloading $(sum_errs reload)"
for ((r = 1; r <= ROUNDS; r++)); do
	echo "round $r: steady p50/p99 $(pct "$TMP/steady-$r.txt" 50)/$(pct "$TMP/steady-$r.txt" 99) µs, reloading $(pct "$TMP/reload-$r.txt" 50)/$(pct "$TMP/reload-$r.txt" 99) µs"
done
echo
echo "| | steady | 10 reloads/s | ratio |"
echo "|---|---:|---:|---:|"
awk -v a="$s50" -v b="$r50" 'BEGIN { printf "| p50 latency (µs) | %d | %d | %.2f× |\n", a, b, b / a }'
awk -v a="$s99" -v b="$r99" 'BEGIN { printf "| p99 latency (µs) | %d | %d | %.2f× |\n", a, b, b / a }'
awk -v a="$a" -v b="$b" 'BEGIN { printf "| requests/s | %d | %d | %.2f× |\n", a, b, b / a }'
