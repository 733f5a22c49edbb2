#!/bin/bash
# tests/bench/h2instr.sh -- what an HTTP/2 forward costs ringproxy and
# HAProxy, counted in instructions (valgrind's callgrind), so that the ratio
# holds on a busy machine where h2.sh's CPU times move by 5% from run to run.
#
# Per scheme (h2c with prior knowledge, and TLS with ALPN h2, the same
# ECDSA P-256 certificate for both proxies): one test cache (4 KiB bodies),
# the proxy (one worker or thread) under `valgrind --tool=callgrind`,
# WARM_N forwards by h2load (-c 10 -m 100, as h2.sh), the counters zeroed
# (callgrind_control -z), N more forwards, a dump (callgrind_control -d).
# Every URL is forwarded (ringproxy's [cache] off, HAProxy without a cache).
# It prints user-space instructions per request and the ratio; the kernel's
# work (system calls, TCP) is not in them: h2.sh measures that, in time.
#
# The scheme h1tls is the same forward over HTTPS/1.1 (h2load --h1 -c 16,
# keep-alive, one request at a time on each connection, as tls.sh's wrk):
# the figure the issue's second goal compares an h2 forward with.
#
# Usage (from the source tree): bash tests/bench/h2instr.sh [BUILD_DIR]
# Environment: N [20000], WARM_N [5000], SCHEMES ["h2c tls"; also h1tls],
# PROXIES ["ringproxy haproxy"].
# Every load is bounded (h2load -n, timeout); every process started is
# stopped by PID (lib.sh).
set -euo pipefail
[ $# -gt 0 ] && BUILD=$(cd "$1" && pwd)
. "$(dirname "$0")/lib.sh"
bench_init h2instr
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
	{ echo "valgrind missing" >&2; exit 1; }
command -v h2load >/dev/null || { echo "h2load missing (nghttp2-client)" >&2; exit 1; }

N=${N:-20000}
WARM_N=${WARM_N:-5000}
SCHEMES=${SCHEMES:-h2c tls}
PROXIES=${PROXIES:-ringproxy haproxy}

bench_caches 0 0 --size 4096
BE=${PORTS[0]}
for i in $(seq 0 9999); do echo "/fwd/$i/1_200x200.jpg"; done >"$TMP/urls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/k.key" \
	-out "$TMP/c.crt" -days 30 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null
cat "$TMP/c.crt" "$TMP/k.key" >"$TMP/10-bench.pem"

# count NAME SCHEME: instructions per forward
count() {
	local name=$1 scheme=$2 port plain url pid ok ir load="-c 10 -m 100"
	read -r port plain <<<"$(bench_free_ports 2)"
	url=http://127.0.0.1:$port
	if [ "$scheme" = h1tls ]; then
		scheme=tls
		load="--h1 -c 16 -m 1"
	fi
	[ "$scheme" = tls ] && url=https://127.0.0.1:$port
	rm -f "$TMP"/cg.out*
	case $name in
	ringproxy)
		{
			printf '[proxy]\nlisten = 127.0.0.1:%s\nworkers = 1\nlog_level = warn\npool_size = 1024\n' \
			       "$([ "$scheme" = tls ] && echo "$plain" || echo "$port")"
			printf '[cache]\nsize = 0\n[h2]\nmax_requests = 100000000\n'
			printf '[backend cache-0]\nurl = http://127.0.0.1:%s\n' "$BE"
			[ "$scheme" = tls ] && printf '[tls]\nlisten = 127.0.0.1:%s\ncerts = %s/*.pem\n' "$port" "$TMP"
		} >"$TMP/rp.ini"
		valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$RP" -c "$TMP/rp.ini" \
			>"$TMP/proxy.log" 2>&1 &
		pid=$! ;;
	haproxy)
		{
			WORKERS=1 bench_haproxy_head
			printf 'frontend f\n\tbind 127.0.0.1:%s %s\n\tdefault_backend b\n' "$port" \
			       "$([ "$scheme" = tls ] && echo "ssl crt $TMP/10-bench.pem alpn h2,http/1.1" || echo "proto h2")"
			printf 'backend b\n\tserver s 127.0.0.1:%s\n' "$BE"
		} >"$TMP/haproxy.cfg"
		valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" haproxy -f "$TMP/haproxy.cfg" -db \
			>"$TMP/proxy.log" 2>&1 &
		pid=$! ;;
	esac
	PIDS+=($pid)
	bench_wait_h2 "$url" "$pid" 300     # under valgrind: slow to start
	sed "1s|^|$url|" "$TMP/urls" >"$TMP/urls-run"
	timeout 600 h2load $load -n "$WARM_N" -i "$TMP/urls-run" >/dev/null
	callgrind_control -z "$pid" >/dev/null 2>&1
	timeout 600 h2load $load -n "$N" -i "$TMP/urls-run" >"$TMP/h2load.out"
	callgrind_control -d "$pid" >/dev/null 2>&1
	ok=$(sed -n 's/.* \([0-9]*\) succeeded.*/\1/p' "$TMP/h2load.out")
	[ "$ok" = "$N" ] || echo "# $name $scheme: $ok of $N succeeded" >&2
	sleep 0.5
	# the dump's part: the one file that is neither the start's nor the exit's
	ir=$(for f in "$TMP"/cg.out.*; do [ -e "$f" ] && awk '/^summary:/ { print $2 }' "$f"; done | sort -n | tail -1)
	bench_stop "$pid"
	echo $((ir / N))
}

echo "# commit $(git -C "$ROOT" rev-parse --short HEAD), N=$N WARM_N=$WARM_N, h2load -c 10 -m 100 (h1tls: --h1 -c 16), 4 KiB bodies"
printf '| scheme | %s |%s\n' "$(echo $PROXIES | sed 's/ / | /g')" "$([ "$PROXIES" = "ringproxy haproxy" ] && echo " ringproxy / HAProxy |")"
printf '|---|%s%s\n' "$(for _ in $PROXIES; do printf -- '---:|'; done)" "$([ "$PROXIES" = "ringproxy haproxy" ] && printf -- '---:|')"
for scheme in $SCHEMES; do
	row=()
	for name in $PROXIES; do row+=("$(count "$name" "$scheme")"); done
	if [ "$PROXIES" = "ringproxy haproxy" ]; then
		printf '| %s | %s | %s | %.2f |\n' "$scheme" "${row[0]}" "${row[1]}" \
		       "$(echo "${row[0]} / ${row[1]}" | bc -l)"
	else
		printf '| %s | %s |\n' "$scheme" "$(IFS='|'; echo "${row[*]}" | sed 's/|/ | /g')"
	fi
done
