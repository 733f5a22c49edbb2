#!/bin/bash
# tests/bench/connmem.sh -- memory per idle client connection, ringproxy
# against HAProxy, in one run.
#
# Usage (from the source tree):
#   bash tests/bench/connmem.sh [BUILD_DIR]        # default: build-rel
#   CONNS=8000 bash tests/bench/connmem.sh
#
# Environment (defaults in brackets):
#   CONNS [8000]    client connections per proxy
#   WORKERS [2]     ringproxy workers = HAProxy nbthread
#   SIZE [4096]     response body bytes (testcache --size)
#   PROXIES ["ringproxy haproxy"]
#   BASE []         a second ringproxy build dir: adds "before" to the run
#
# What it does: starts 2 testcaches and each proxy (default config, the
# same backends as compare.sh; HAProxy with maxconn raised to fit CONNS),
# one after the other; for each, connmem.py opens CONNS connections and
# reports bytes per connection from the growth of the proxy's VmRSS and of
# its Pss (smaps_rollup) over a reading taken before: "idle" with every
# connection open and nothing sent, "after" once every connection sent one
# request (all at once, so all are busy together) and got its response,
# and is idle again. Each proxy is stopped before the next starts, so they
# do not share the machine's memory. Every process started is stopped by
# its PID on exit; every run is bounded by `timeout`.
set -euo pipefail

CONNS=${CONNS:-8000}
WORKERS=${WORKERS:-2}
SIZE=${SIZE:-4096}
PROXIES=${PROXIES:-ringproxy haproxy}

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init connmem
# each connection is an fd in the proxy: raise the limit it inherits
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((CONNS + 200)) ] || { echo "connmem.sh: ulimit -Hn too low for CONNS=$CONNS" >&2; exit 1; }
if [ -n "${BASE:-}" ]; then
	ninja -C "$BASE" >/dev/null
	PROXIES="$PROXIES before"
fi

bench_caches 1 2 --size "$SIZE"
for i in 1 2; do bench_wait_http "${PORTS[i]}" /__stats; done

declare -A res
for p in $PROXIES; do
	read -r PORT <<<"$(bench_free_ports 1)"
	case $p in
	ringproxy|before)
		bin=$RP
		[ "$p" = before ] && bin=$BASE/src/ringproxy
		{
			printf '[proxy]\nlisten = 127.0.0.1:%s\nworkers = %s\nlog_level = warn\nmax_connections = %s\n' \
			    "$PORT" "$WORKERS" $((CONNS + 100))
			for i in 1 2; do
				printf '[backend cache-%s]\nurl = http://127.0.0.1:%s\n' "$i" "${PORTS[i]}"
			done
		} >"$TMP/$p.ini"
		"$bin" -c "$TMP/$p.ini" >"$TMP/$p.log" 2>&1 &
		;;
	haproxy)
		{
			cat <<EOC
global
	nbthread $WORKERS
	maxconn $((CONNS + 100))
defaults
	mode http
	timeout connect 1s
	timeout client 60s
	timeout server 10s
	http-reuse always
frontend fe
	bind 127.0.0.1:$PORT
	default_backend caches
backend caches
	balance uri
	hash-type consistent
EOC
			for i in 1 2; do printf '\tserver cache-%s 127.0.0.1:%s\n' "$i" "${PORTS[i]}"; done
		} >"$TMP/haproxy.cfg"
		haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
		;;
	*) echo "connmem.sh: unknown proxy $p" >&2; exit 1 ;;
	esac
	pid=$!
	PIDS+=("$pid")
	bench_wait_http "$PORT" /thumbs/0/0_200x200.jpg "$pid"
	res[$p]=$(timeout 300 python3 "$ROOT/tests/bench/connmem.py" --port "$PORT" --pid "$pid" --conns "$CONNS")
	echo "# $p: ${res[$p]}" >&2
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
done

echo "### bytes per client connection, $CONNS connections, $WORKERS workers"
echo
echo "| proxy | idle, nothing sent (RSS) | idle after a request (RSS) | idle, nothing sent (Pss) | idle after a request (Pss) |"
echo "|---|---|---|---|---|"
for p in $PROXIES; do
	r=${res[$p]}
	printf '| %s | %s | %s | %s | %s |\n' "$p" "$(bench_kv before_rss "$r")" "$(bench_kv after_rss "$r")" \
	    "$(bench_kv before_pss "$r")" "$(bench_kv after_pss "$r")"
done
