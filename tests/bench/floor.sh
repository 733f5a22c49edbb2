#!/bin/bash
# tests/bench/floor.sh -- issue 28: ringproxy against the floor, the bare
# programs of this directory that do nothing but the syscalls a request
# needs, and against HAProxy and NGINX, in one run, on one hot 4 KiB object.
#
# Usage (from the source tree):
#   bash tests/bench/floor.sh [BUILD_DIR]         # default: build-rel
#   ROUNDS=1 SECS=3 bash tests/bench/floor.sh     # a quick look
#
# The two paths, each server on one 127.0.0.1 port (all started once):
#   hit      answer from memory: ringproxy's hot-object cache (its default
#            [cache]; the object is asked for during WARM, so it is stored)
#            vs bare-respond (one thread a core, epoll, read, one fixed
#            write) vs HAProxy's `cache` vs NGINX serving the same bytes as a
#            static file (sendfile)
#   forward  no cache anywhere: ringproxy with [cache] size = 0 vs
#            bare-forward (each client connection paired with its own
#            backend connection, bytes relayed unparsed) vs HAProxy vs NGINX
#            (upstream keep-alive), all to the same testcache
# and ringproxy again with [log] access on (access_format combined, to a
# file in the temp dir) on both paths.
#
# Per run: WARM s of unmeasured load, then SECS s of `wrk -t1 -cCONNS` on
# the one URL; CPU per request = the run time of the server's threads (its
# PID, and NGINX's workers; /proc/PID/task/*/schedstat before and after, in
# ns) / the requests wrk completed, split into user and system time as
# their utime and stime (clock ticks of 10 ms, too coarse for the total:
# 400-odd of them a run) split it. Only the server's own CPU is counted,
# not wrk's or the testcache's, so on a shared machine the figure moves
# less than req/s.
# Rounds rotate the order; the table holds medians over ROUNDS.
#
# Environment (defaults in brackets):
#   ROUNDS [3], SECS [5], WARM [1], CONNS [32], WORKERS [2] (threads,
#   workers or processes of every server), SIZE [4096] body bytes
#   QUIET_PCT [10], QUIET_WAIT [30] as lib.sh's bench_quiet; KEEP [0]
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-5}
WARM=${WARM:-1}
CONNS=${CONNS:-32}
WORKERS=${WORKERS:-2}
SIZE=${SIZE:-4096}
URL=/thumbs/1/1_200x200.jpg

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init floor

die() { echo "floor.sh: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

bench_caches 1 1 --size "$SIZE"
ORIGIN=${PORTS[1]}
bench_wait_http "$ORIGIN" /__stats

read -r P_RP_HIT P_RP_FWD P_RP_HITLOG P_RP_FWDLOG P_HA_HIT P_HA_FWD P_NG_HIT P_NG_FWD \
    P_BARE_HIT P_BARE_FWD <<<"$(bench_free_ports 10)"

# --- servers -----------------------------------------------------------------
declare -A port pid label
start() { # NAME PORT COMMAND...: starts it, waits for it to answer
	local name=$1 p=$2
	shift 2
	"$@" >"$TMP/$name.log" 2>&1 &
	pid[$name]=$!
	port[$name]=$p
	PIDS+=($!)
	bench_wait_http "$p" "$URL" "${pid[$name]}"
}

rp_ini() { # PORT CACHE(1|0) LOG(1|0)
	printf '[proxy]\nlisten = 127.0.0.1:%s\nworkers = %s\nlog_level = warn\n' "$1" "$WORKERS"
	printf '[backend origin]\nurl = http://127.0.0.1:%s\n' "$ORIGIN"
	[ "$2" = 1 ] || printf '[cache]\nsize = 0\n'
	[ "$3" = 1 ] && printf '[log]\naccess = %s\naccess_format = combined\n' "$TMP/access-$1.log"
	return 0
}
for v in "rp-hit $P_RP_HIT 1 0" "rp-fwd $P_RP_FWD 0 0" \
    "rp-hit-log $P_RP_HITLOG 1 1" "rp-fwd-log $P_RP_FWDLOG 0 1"; do
	read -r name p c l <<<"$v"
	rp_ini "$p" "$c" "$l" >"$TMP/$name.ini"
	start "$name" "$p" "$RP" -c "$TMP/$name.ini"
done

start bare-hit "$P_BARE_HIT" "$BUILD/tests/bench/bare-respond" \
    --listen "127.0.0.1:$P_BARE_HIT" --threads "$WORKERS" --size "$SIZE"
start bare-fwd "$P_BARE_FWD" "$BUILD/tests/bench/bare-forward" \
    --listen "127.0.0.1:$P_BARE_FWD" --to "127.0.0.1:$ORIGIN" --threads "$WORKERS"

{
	bench_haproxy_head
	cat <<EOF
cache hot
	total-max-size 16
	max-object-size $((SIZE + 4096))
	max-age 3600
frontend hit
	bind 127.0.0.1:$P_HA_HIT
	default_backend cached
frontend fwd
	bind 127.0.0.1:$P_HA_FWD
	default_backend origin
backend cached
	http-request cache-use hot
	http-response cache-store hot
	server origin 127.0.0.1:$ORIGIN
backend origin
	server origin 127.0.0.1:$ORIGIN
EOF
} >"$TMP/haproxy.cfg"
haproxy -c -q -f "$TMP/haproxy.cfg" || die "haproxy refuses $TMP/haproxy.cfg"
start haproxy "$P_HA_HIT" haproxy -db -f "$TMP/haproxy.cfg"

mkdir -p "$TMP/nginx" "$TMP/www${URL%/*}"
curl -s -o "$TMP/www$URL" "http://127.0.0.1:$ORIGIN$URL"   # the same bytes
{
	bench_nginx_head
	cat <<EOF
	sendfile on;
	upstream origin {
		server 127.0.0.1:$ORIGIN;
		keepalive $CONNS;
		keepalive_requests 1000000;
	}
	server {
		listen 127.0.0.1:$P_NG_HIT;
		root $TMP/www;
	}
	server {
		listen 127.0.0.1:$P_NG_FWD;
		location / {
			proxy_pass http://origin;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
EOF
} >"$TMP/nginx.conf"
start nginx "$P_NG_HIT" nginx -p "$TMP/nginx" -e "$TMP/nginx/error.log" -c "$TMP/nginx.conf"

HA_VER=$(haproxy -v | sed -n '1s/.*version \([0-9]*\.[0-9]*\).*/\1/p')
NG_VER=$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9]*\.[0-9]*\).*|\1|p')

# the runs: NAME SERVER PORT; a server's processes: its PID and (NGINX) its
# workers
RUNS=("hit.bare bare-hit $P_BARE_HIT" "hit.rp rp-hit $P_RP_HIT" "hit.ha haproxy $P_HA_HIT"
      "hit.ng nginx $P_NG_HIT" "hit.rplog rp-hit-log $P_RP_HITLOG"
      "fwd.bare bare-fwd $P_BARE_FWD" "fwd.rp rp-fwd $P_RP_FWD" "fwd.ha haproxy $P_HA_FWD"
      "fwd.ng nginx $P_NG_FWD" "fwd.rplog rp-fwd-log $P_RP_FWDLOG")
server_pids() { echo "${pid[$1]}" $(cat /proc/"${pid[$1]}"/task/*/children 2>/dev/null); }

cat >"$TMP/one.lua" <<'EOF'
function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format("RESULT requests=%d duration_us=%d p99_us=%d errors=%d\n",
		summary.requests, summary.duration, latency:percentile(99),
		e.connect + e.read + e.write + e.status + e.timeout))
end
EOF
run_wrk() { # PORT SECONDS -> the RESULT line
	timeout -k 5 $(($2 + 20)) wrk -t1 -c"$CONNS" -d"$2"s -s "$TMP/one.lua" \
	    "http://127.0.0.1:$1$URL" | grep '^RESULT' || die "wrk failed on port $1"
}

# a hit must be one: ringproxy's cache and HAProxy's answer the URL from
# memory once it has been asked for twice (the origin's count stays put)
origin_requests() { curl -s "http://127.0.0.1:$ORIGIN/__stats" | sed 's/.*"requests": \([0-9]*\).*/\1/'; }
for p in "$P_RP_HIT" "$P_RP_HITLOG" "$P_HA_HIT"; do
	run_wrk "$p" 1 >/dev/null
	n0=$(origin_requests)
	res=$(run_wrk "$p" 1)
	n1=$(origin_requests)
	# a health check or two may reach the origin meanwhile, not thousands
	[ $((n1 - n0)) -lt 10 ] ||
		die "port $p sent $((n1 - n0)) of $(bench_kv requests "$res") requests to the origin: not a hit (configs in $TMP)"
done

runs=$TMP/runs.tsv
: >"$runs"
log "wrk -t1 -c$CONNS, ${SECS}s x $ROUNDS rounds, $SIZE B body, $WORKERS threads each, origin :$ORIGIN"
for r in $(seq "$ROUNDS"); do
	for k in $(seq 0 $((${#RUNS[@]} - 1))); do
		read -r name srv p <<<"${RUNS[$(((k + r - 1) % ${#RUNS[@]}))]}"
		bench_quiet
		run_wrk "$p" "$WARM" >/dev/null
		read -r -a pp <<<"$(server_pids "$srv")"
		read -r u0 s0 <<<"$(bench_cpu_ticks "${pp[@]}")"
		ns0=$(bench_cpu_ns "${pp[@]}")
		res=$(run_wrk "$p" "$SECS")
		ns1=$(bench_cpu_ns "${pp[@]}")
		read -r u1 s1 <<<"$(bench_cpu_ticks "${pp[@]}")"
		# the total from the threads' exact run time (schedstat, ns);
		# the ticks, 10 ms each, only split it into user and system
		awk -v name="$name" -v r="$r" -v n="$(bench_kv requests "$res")" \
		    -v d="$(bench_kv duration_us "$res")" -v p99="$(bench_kv p99_us "$res")" \
		    -v e="$(bench_kv errors "$res")" -v u="$((u1 - u0))" -v s="$((s1 - s0))" \
		    -v ns="$((ns1 - ns0))" 'BEGIN {
			n = n > 0 ? n : 1
			t = ns / 1e3 / n
			us = u + s > 0 ? u / (u + s) : 0
			printf "%s\t%d\t%.3f\t%.0f\t%d\t%d\t%.3f\t%.3f\n", name, r, t,
			    n / (d / 1e6), p99, e, t * us, t * (1 - us) }' | tee -a "$runs" |
		    awk -F'\t' '{ printf "# round %d %-10s %6.2f us/req CPU (user %5.2f, sys %5.2f)  %7d req/s  p99 %6d us  %d errors\n",
			$2, $1, $3, $7, $8, $4, $5, $6 }' >&2
	done
done

# --- the table -----------------------------------------------------------------
declare -A m
for v in "${RUNS[@]}"; do
	read -r name _ <<<"$v"
	m[$name]=$(bench_median "$runs" "$name" 3)
done
cell() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f µs = %.2f×", a, a / b }'; }
echo
echo "### the floor: CPU per request of the server alone (commit $(git -C "$ROOT" rev-parse --short HEAD))"
echo
echo "wrk -t1 -c$CONNS on one hot $SIZE B object, $WORKERS threads each, ${SECS} s x $ROUNDS rounds" \
     "(medians), $(nproc) CPUs; run time of the server's threads (schedstat) / requests."
echo
echo "| path | bare program | ringproxy | HAProxy $HA_VER | NGINX $NG_VER | ringproxy, access log on |"
echo "|---|---:|---:|---:|---:|---:|"
for path in hit fwd; do
	b=${m[$path.bare]}
	if [ "$path" = hit ]; then
		printf '| hit: answer from memory | %.2f µs (bare-respond) | %s (cache hit) | %s (`cache`) | %s (static file) | %s |\n' \
		    "$b" "$(cell "${m[hit.rp]}" "$b")" "$(cell "${m[hit.ha]}" "$b")" \
		    "$(cell "${m[hit.ng]}" "$b")" "$(cell "${m[hit.rplog]}" "$b")"
	else
		printf '| forward: no cache anywhere | %.2f µs (bare-forward) | %s (`size = 0`) | %s | %s | %s |\n' \
		    "$b" "$(cell "${m[fwd.rp]}" "$b")" "$(cell "${m[fwd.ha]}" "$b")" \
		    "$(cell "${m[fwd.ng]}" "$b")" "$(cell "${m[fwd.rplog]}" "$b")"
	fi
done
echo
awk -v h="${m[hit.rp]}" -v hb="${m[hit.bare]}" -v f="${m[fwd.rp]}" -v fb="${m[fwd.bare]}" 'BEGIN {
	printf "goal: hit <= 1.10x bare: %.2fx %s; forward <= 1.10x bare: %.2fx %s\n",
	    h / hb, (h / hb <= 1.1 ? "met" : "not met"), f / fb, (f / fb <= 1.1 ? "met" : "not met") }'
echo
echo "<details><summary>every run</summary>"
echo
echo "| run | round | CPU µs/req | req/s | p99 µs | errors | user µs/req | system µs/req |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '{ printf "| %s |", $1; for (i = 2; i <= NF; i++) printf " %s |", $i; print "" }' "$runs"
echo
echo "</details>"
