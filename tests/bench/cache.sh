#!/bin/bash
# tests/bench/cache.sh -- issue 11: ringproxy's hot-object cache against
# HAProxy 2.6's `cache` and NGINX 1.22's `proxy_cache` on tmpfs, side by side
# in one run, each with CACHE_SIZE of cache, in front of the same four test
# caches serving 4 KiB thumbnails with `Cache-Control: public, max-age=3600`.
#
# Usage (from the source tree):
#   bash tests/bench/cache.sh [BUILD_DIR]               # default: build-rel
#   ROUNDS=1 SECS=3 bash tests/bench/cache.sh           # a quick look
#   RP_CACHE=0 bash tests/bench/cache.sh                # ringproxy without [cache]
#
# Scenarios (SCENARIOS, in this order):
#   viral-cold  CLIENTS (200) connections, all established first, send the
#               same GET for a URL no proxy has seen (a fresh one per proxy
#               and round) whose cache takes DELAY (100) ms to answer
#               (tests/bench/burst.py).  Per proxy: the backend fetches
#               that URL caused (the four testcaches' request counters from
#               /__stats, read before and after; nothing else runs
#               meanwhile), the slowest client's time and the median
#               client's, from its own write to its last response byte;
#               every body is checked against the testcache's formula.
#               Goal: exactly 1 fetch, slowest <= 1.3 x DELAY.
#   zipf        wrk (tests/bench/zipf.lua) over URLS (200,000) URLs, rank r
#               asked with probability proportional to r^-ZIPF_S (0.9).
#   hot50       half of the requests on one URL, the rest uniform over URLS.
#               For zipf and hot50, per run: unmeasured load first (WARM s
#               before a proxy's first run of the scenario, long enough for
#               the caches to fill and TinyLFU's sketch to have a history;
#               REWARM s before later rounds: the caches are never emptied
#               between runs or rounds), then SECS s
#               measured: hit ratio = requests served without reaching a
#               backend / client requests = (wrk's requests - wrk's errors -
#               the testcaches' request count over the run) / wrk's requests;
#               req/s, p50, p99 (exact, from wrk's done()); CPU per request
#               and RSS as compare.sh measures them (schedstat of every
#               thread of the proxy's processes, NGINX's cache manager
#               included; VmRSS after the run); for NGINX also the size its
#               cache takes on tmpfs (du) and its file count after the run,
#               because NGINX enforces max_size lazily (its cache manager
#               deletes at most 100 files per 50 ms pass) and its keys zone
#               (NGX_KEYS) bounds the objects too.  Goals: hit ratio >=
#               1.1 x HAProxy's and above NGINX's, CPU/request <= 0.8 x
#               HAProxy's, p99 <= both.
#
# The proxies (2 threads/workers each, hashing the request URI onto a
# consistent ring over the 4 testcaches, keep-alive to them, as compare.sh):
#   ringproxy  balance_factor 1.5, and with RP_CACHE=1 a [cache] section:
#              size = CACHE_SIZE, max_object = 1m, lock_timeout = 5s
#              (a build without the cache refuses the section: RP_CACHE=0)
#   haproxy    a `cache` section: total-max-size CACHE_SIZE (in MB),
#              max-object-size HA_MAX_OBJECT (8192: a 4 KiB body and its
#              headers), max-age 3600 (else its default of 60 s caps the
#              response's); `http-request cache-use` + `http-response
#              cache-store` in the backend
#   nginx      proxy_cache_path on tmpfs (a fresh dir under /dev/shm, or a
#              tmpfs the script mounts when it is root and /dev/shm is not
#              tmpfs), levels=1:2, keys_zone=thumbs:NGX_KEYS,
#              max_size=CACHE_SIZE, use_temp_path=off; proxy_cache_lock on
#              with a 5 s timeout and age, as ringproxy's lock_timeout
# Before measuring, the script asks every proxy for one URL twice: HAProxy
# and NGINX must answer the second from their cache (else the run stops:
# the comparison would be void); for ringproxy it reports what happened.
#
# Environment (defaults in brackets):
#   ROUNDS [3], SECS [10]   rounds (order rotated per round), measured
#                  wrk seconds per run
#   WARM [25], REWARM [3]   unmeasured wrk seconds before a proxy's first
#                  zipf (hot50) run, and before each later one
#   SCENARIOS ["viral-cold zipf hot50"], PROXIES ["ringproxy haproxy nginx"]
#   CACHE_SIZE [64m]   cache of every proxy (k, m or g)
#   RP_CACHE [1]   0: no [cache] section for ringproxy
#   RP_MIN_USES [] ringproxy's [cache] min_uses (empty: its default, 2)
#   BASE []        a second ringproxy build dir: adds the proxy "before"
#                  (same config; BASE_CACHE [=RP_CACHE] for its [cache])
#                  and a before/after table per scenario
#   NGX_KEYS [1m]  NGINX keys zone (1 MB holds about 8,000 keys; a 4 KiB
#                  object takes 8 KiB of tmpfs, so 1m holds NGINX near
#                  64 MB; a larger zone shows max_size's lazy enforcement)
#   HA_MAX_OBJECT [8192]
#   WORKERS [2], WRK_THREADS [2], CONNS [64], URLS [200000], ZIPF_S [0.9],
#   SIZE [4096], TC_THREADS [1]     as in compare.sh
#   DELAY [100], CLIENTS [200], BURST_TIMEOUT [10]   viral-cold
#   KEEP [0]       1: keep the temp dir and NGINX's cache dir
#   QUIET_PCT [10], QUIET_WAIT [30], MAX_OTHER [5], RETRIES [2]   as in
#                  compare.sh (zipf and hot50 runs are repeated when other
#                  work took more than MAX_OTHER % of the CPUs)
#
# Caveats: everything shares 2 cores, so compare ratios within one run, never
# figures across runs (see compare.sh).  The hit ratio counts from the
# backends' side, so it holds for every proxy whatever headers it adds;
# requests in flight when wrk stops (at most CONNS) blur it by < 0.1%.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
WARM=${WARM:-25}
REWARM=${REWARM:-3}
SCENARIOS=${SCENARIOS:-viral-cold zipf hot50}
PROXIES=${PROXIES:-ringproxy haproxy nginx}
CACHE_SIZE=${CACHE_SIZE:-64m}
RP_CACHE=${RP_CACHE:-1}
BASE_CACHE=${BASE_CACHE:-$RP_CACHE}
NGX_KEYS=${NGX_KEYS:-1m}
HA_MAX_OBJECT=${HA_MAX_OBJECT:-8192}
WORKERS=${WORKERS:-2}
WRK_THREADS=${WRK_THREADS:-2}
CONNS=${CONNS:-64}
URLS=${URLS:-200000}
ZIPF_S=${ZIPF_S:-0.9}
SIZE=${SIZE:-4096}
TC_THREADS=${TC_THREADS:-1}
DELAY=${DELAY:-100}
CLIENTS=${CLIENTS:-200}
BURST_TIMEOUT=${BURST_TIMEOUT:-10}
KEEP=${KEEP:-0}
QUIET_PCT=${QUIET_PCT:-10}
QUIET_WAIT=${QUIET_WAIT:-30}
MAX_OTHER=${MAX_OTHER:-5}
RETRIES=${RETRIES:-2}
NCACHES=4

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init cache
HERE=$ROOT/tests/bench

die() { echo "cache.sh: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

for s in $SCENARIOS; do
	case $s in viral-cold | zipf | hot50) ;; *) die "unknown scenario $s" ;; esac
done
# CACHE_SIZE in MiB for HAProxy's total-max-size (megabytes, an integer)
case $CACHE_SIZE in
*[kK]) CACHE_MB=$(( ${CACHE_SIZE%?} / 1024 )) ;;
*[mM]) CACHE_MB=${CACHE_SIZE%?} ;;
*[gG]) CACHE_MB=$(( ${CACHE_SIZE%?} * 1024 )) ;;
*) CACHE_MB=$(( CACHE_SIZE / 1048576 )) ;;
esac
[ "$CACHE_MB" -ge 1 ] 2>/dev/null || die "CACHE_SIZE=$CACHE_SIZE: want at least 1m (k, m or g)"

# NGINX's cache on tmpfs, outside TMP (it may be mounted), removed on exit
NGX_MOUNTED=0
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	NGX_CACHE=$(mktemp -d /dev/shm/rp-bench-nginx-cache.XXXXXX)
elif [ "$(id -u)" -eq 0 ]; then
	NGX_CACHE=$(mktemp -d /tmp/rp-bench-nginx-cache.XXXXXX)
	mount -t tmpfs -o size=4g,mode=755 tmpfs "$NGX_CACHE"
	NGX_MOUNTED=1
else
	die "/dev/shm is not tmpfs and only root may mount one for NGINX's cache"
fi
cache_cleanup() {
	bench_cleanup
	if [ "$NGX_MOUNTED" = 1 ]; then
		umount "$NGX_CACHE" 2>/dev/null || true
		rmdir "$NGX_CACHE" 2>/dev/null || true
	elif [ "$KEEP" = 1 ]; then
		echo "# kept $NGX_CACHE" >&2
	else
		rm -rf "$NGX_CACHE"
	fi
}
trap cache_cleanup EXIT

# --- backends ----------------------------------------------------------------
bench_caches 1 "$NCACHES" --size "$SIZE" --threads "$TC_THREADS" \
    --cache-control "public, max-age=3600"
for i in $(seq $NCACHES); do bench_wait_http "${PORTS[i]}" /__stats; done

# The testcaches' request counters, summed (their admin paths are not
# counted, and no proxy here runs health checks).
backend_requests() {
	local i n t=0
	for i in $(seq $NCACHES); do
		n=$(curl -s --max-time 2 "http://127.0.0.1:${PORTS[i]}/__stats" |
		    sed -n 's/.*"requests": \([0-9]*\).*/\1/p')
		[ -n "$n" ] || die "cache-$i does not report its counters"
		t=$((t + n))
	done
	echo "$t"
}

# --- proxies -------------------------------------------------------------
read -r RP_PORT HA_PORT NG_PORT BASE_PORT <<<"$(bench_free_ports 4)"
if [ -n "${BASE:-}" ]; then
	ninja -C "$BASE" >/dev/null
	[ -x "$BASE/src/ringproxy" ] || die "BASE=$BASE has no src/ringproxy"
	[[ " $PROXIES " == *" before "* ]] || PROXIES="$PROXIES before"
fi
HA_VER=$(haproxy -v | sed -n '1s/.*version \([0-9]*\.[0-9]*\).*/\1/p')
NG_VER=$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9]*\.[0-9]*\).*|\1|p')

# rp_ini PORT CACHE(0/1): ringproxy's config
rp_ini() {
	printf '[proxy]\nlisten = 127.0.0.1:%s\nworkers = %s\nlog_level = warn\n' \
	    "$1" "$WORKERS"
	printf '[ring]\nvnodes = 160\nbalance_factor = 1.5\n'
	if [ "$2" = 1 ]; then
		printf '[cache]\nsize = %s\nmax_object = 1m\nlock_timeout = 5s\n' "$CACHE_SIZE"
		[ -n "${RP_MIN_USES:-}" ] && printf 'min_uses = %s\n' "$RP_MIN_USES"
	fi
	for i in $(seq $NCACHES); do
		printf '[backend cache-%s]\nurl = http://127.0.0.1:%s\n' \
		    "$i" "${PORTS[i]}"
	done
}
rp_ini "$RP_PORT" "$RP_CACHE" >"$TMP/ringproxy.ini"
rp_ini "$BASE_PORT" "$BASE_CACHE" >"$TMP/before.ini"

{
	bench_haproxy_head
	cat <<EOF
cache thumbs
	total-max-size $CACHE_MB
	max-object-size $HA_MAX_OBJECT
	max-age 3600
frontend fe
	bind 127.0.0.1:$HA_PORT
	default_backend caches
backend caches
	balance uri
	hash-type consistent
	hash-balance-factor 150
	http-request cache-use thumbs
	http-response cache-store thumbs
EOF
	for i in $(seq $NCACHES); do
		printf '\tserver cache-%s 127.0.0.1:%s\n' "$i" "${PORTS[i]}"
	done
} >"$TMP/haproxy.cfg"

mkdir -p "$TMP/nginx"
{
	bench_nginx_head
	cat <<EOF
	proxy_cache_path $NGX_CACHE levels=1:2 keys_zone=thumbs:$NGX_KEYS
	    max_size=$CACHE_SIZE inactive=1h use_temp_path=off;
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
			proxy_cache thumbs;
			proxy_cache_lock on;
			proxy_cache_lock_timeout 5s;
			proxy_cache_lock_age 5s;
		}
	}
}
EOF
} >"$TMP/nginx.conf"

declare -A ppid pport label
label[ringproxy]="ringproxy"
[ "$RP_CACHE" = 1 ] || label[ringproxy]="ringproxy, no cache (RP_CACHE=0)"
label[before]="before (${BASE:-})"
[ "$BASE_CACHE" = 1 ] || label[before]="before (${BASE:-}), no cache"
label[haproxy]="HAProxy $HA_VER cache"
label[nginx]="NGINX $NG_VER proxy_cache"

# check_rp BINARY INI CACHE: the config must load before we start it
check_rp() {
	local out
	out=$("$1" -t -c "$2" 2>&1 >/dev/null) && return 0
	echo "$out" >&2
	[ "$3" = 1 ] && die "this ringproxy ($1) refuses the [cache] section above;" \
	    "a build without the cache runs with RP_CACHE=0 (or BASE_CACHE=0)"
	die "ringproxy refuses $2"
}
start_proxy() {
	case $1 in
	ringproxy)
		check_rp "$RP" "$TMP/ringproxy.ini" "$RP_CACHE"
		"$RP" -c "$TMP/ringproxy.ini" >"$TMP/ringproxy.log" 2>&1 &
		pport[$1]=$RP_PORT ;;
	before)
		check_rp "$BASE/src/ringproxy" "$TMP/before.ini" "$BASE_CACHE"
		"$BASE/src/ringproxy" -c "$TMP/before.ini" >"$TMP/before.log" 2>&1 &
		pport[$1]=$BASE_PORT ;;
	haproxy)
		haproxy -c -q -f "$TMP/haproxy.cfg" || die "haproxy refuses $TMP/haproxy.cfg"
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
	bench_wait_http "${pport[$1]}" /__up "${ppid[$1]}"
}
for p in $PROXIES; do start_proxy "$p"; done

# The processes of a proxy: its PID and (NGINX) its workers and cache
# manager. Not NGINX's cache loader: it exits on its own a minute after
# the start, which once fell in a measured run (its CPU vanished from the
# sum between the two samples, and reading its gone /proc files ended the
# script during NGINX's zipf run); it only reads the cache directory.
proxy_pids() {
	local p=${ppid[$1]} c
	echo -n "$p"
	for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
		tr '\0' ' ' </proc/"$c"/cmdline 2>/dev/null | grep -q 'cache loader' && continue
		echo -n " $c"
	done
	echo
}
HZ=$(getconf CLK_TCK)
cache_pids=("${PIDS[@]:0:$NCACHES}")

# NGINX's cache on tmpfs: "MiB files"
ngx_disk() {
	echo "$(du -sk "$NGX_CACHE" | awk '{ printf "%.1f", $1 / 1024 }')" \
	    "$(find "$NGX_CACHE" -type f | wc -l)"
}

# Does the proxy answer a repeated GET from its cache?  Two GETs of one URL,
# then the backends' count: 1 = stored.  The second response's Cache-Status
# (RFC 9211) is logged when there is one.
probe_cache() {
	local p=$1 url=/thumbs/probe/$1.jpg b0 b1 cs
	b0=$(backend_requests)
	curl -s -o /dev/null --max-time 5 "http://127.0.0.1:${pport[$p]}$url"
	sleep 0.2
	cs=$(curl -s -o /dev/null -D - --max-time 5 "http://127.0.0.1:${pport[$p]}$url" |
	    tr -d '\r' | sed -n 's/^[Cc]ache-[Ss]tatus: //p')
	b1=$(backend_requests)
	if [ $((b1 - b0)) -eq 1 ]; then
		log "$p answers a repeated GET from its cache${cs:+ (Cache-Status: $cs)}"
	elif [ "$p" = haproxy ] || [ "$p" = nginx ]; then
		die "$p sent a repeated GET to the backends $((b1 - b0)) times: its cache is not working (configs in $TMP)"
	else
		log "$p sent a repeated GET to the backends $((b1 - b0)) times: it caches nothing${cs:+ (Cache-Status: $cs)}"
	fi
}
for p in $PROXIES; do probe_cache "$p"; done

# --- runs ----------------------------------------------------------------
# run_wrk MODE PORT SECONDS -> the RESULT line of zipf.lua
run_wrk() {
	timeout -k 5 $(($3 + 20)) wrk -t"$WRK_THREADS" -c"$CONNS" -d"$3"s \
	    -s "$HERE/zipf.lua" "http://127.0.0.1:$2/" -- \
	    "$1" "$URLS" "$ZIPF_S" "/thumbs/$1/" |
	    grep '^RESULT' || die "wrk failed on port $2"
}

# run_viral PROXY ROUND: one burst on a URL nobody asked for yet
run_viral() {
	local p=$1 r=$2 url res b0 b1 st
	url="/thumbs/viral/r$r-$p.jpg?delay=$DELAY"
	bench_quiet
	b0=$(backend_requests)
	res=$(timeout -k 5 $((BURST_TIMEOUT + 20)) python3 "$HERE/burst.py" \
	    "${pport[$p]}" "$url" "$CLIENTS" "$BURST_TIMEOUT" "$SIZE") ||
	    die "burst.py failed on $p"
	b1=$(backend_requests)
	st=$(sed -n 's/.* statuses=\([^ ]*\).*/\1/p' <<<"$res")
	printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n' "$p" "$r" $((b1 - b0)) \
	    "$(bench_kv p50_us "$res")" "$(bench_kv max_us "$res")" \
	    "$(bench_kv span_us "$res")" "$(bench_kv errors "$res")" \
	    "$(bench_kv bad_body "$res")" "$st" >"$TMP/run.tsv"
	awk -F'\t' '{ printf "# viral-cold round %d %-9s %4d fetches  slowest %7.1f ms  p50 %7.1f ms  %d errors  %d bad bodies  statuses %s\n", $2, $1, $3, $5 / 1000, $4 / 1000, $7, $8, $9 }' "$TMP/run.tsv" >&2
}

# run_load SCENARIO PROXY ROUND: WARM s unmeasured, then SECS s measured
run_load() {
	local sc=$1 p=$2 r=$3 port=${pport[$2]} attempt res disk=-1 files=-1 warm=$WARM
	[ "$r" -gt 1 ] && warm=$REWARM
	for attempt in $(seq 0 "$RETRIES"); do
		bench_quiet
		[ "$warm" -gt 0 ] && run_wrk "$sc" "$port" "$warm" >/dev/null
		read -r -a pp <<<"$(proxy_pids "$p")"
		read -r u0 s0 <<<"$(bench_cpu_ticks "${pp[@]}")"
		ns0=$(bench_cpu_ns "${pp[@]}")
		read -r c0 c0s <<<"$(bench_cpu_ticks "${cache_pids[@]}")"
		w0=$(bench_child_ticks); read -r b0 t0 <<<"$(bench_sys_ticks)"
		k0=$(backend_requests)
		res=$(run_wrk "$sc" "$port" "$SECS")
		k1=$(backend_requests)
		read -r b1 t1 <<<"$(bench_sys_ticks)"; w1=$(bench_child_ticks)
		read -r c1 c1s <<<"$(bench_cpu_ticks "${cache_pids[@]}")"
		read -r u1 s1 <<<"$(bench_cpu_ticks "${pp[@]}")"
		ns1=$(bench_cpu_ns "${pp[@]}")
		ours=$((u1 - u0 + s1 - s0 + c1 + c1s - c0 - c0s + w1 - w0))
		other=$(((b1 - b0 - ours) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1)))
		[ "$other" -lt 0 ] && other=0
		rss=$(bench_rss_kib "${pp[@]}")
		[ "$p" = nginx ] && read -r disk files <<<"$(ngx_disk)"
		n=$(bench_kv requests "$res"); d=$(bench_kv duration_us "$res")
		awk -v p="$p" -v r="$r" -v n="$n" -v d="$d" \
		    -v p50="$(bench_kv p50_us "$res")" -v p99="$(bench_kv p99_us "$res")" \
		    -v e="$(bench_kv errors "$res")" -v u="$((u1 - u0))" -v s="$((s1 - s0))" \
		    -v rss="$rss" -v o="$other" -v ns="$((ns1 - ns0))" \
		    -v k="$((k1 - k0))" -v disk="$disk" -v files="$files" \
		    -v wrk="$((w1 - w0))" -v hz="$HZ" 'BEGIN {
			n1 = (n > 0 ? n : 1)
			cpu = ns / 1000 / n1
			us = (u + s > 0 ? cpu / (u + s) : 0)
			hit = (n - e - k) / n1 * 100
			if (hit < 0) hit = 0
			printf "%s\t%d\t%.0f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%d\t%.1f\t%d\t%s\t%d\t%.2f\n",
			    p, r, n / (d / 1e6), p50, p99, cpu, u * us, s * us,
			    rss / 1024, e, o, hit, k, disk, files, wrk * 1e6 / hz / n1 }' >"$TMP/run.tsv"
		awk -F'\t' -v sc="$sc" '{ printf "# %s round %d %-9s hit %5.1f%%  %7d req/s  p50 %5d us  p99 %6d us  %6.2f us/req CPU  %6.1f MiB", sc, $2, $1, $12, $3, $4, $5, $6, $9
		    if ($14 >= 0) printf "  tmpfs %.1f MiB in %d files", $14, $15
		    printf "  %d errors  wrk %.1f us/req  other %d%%\n", $10, $16, $11 }' "$TMP/run.tsv" >&2
		[ "$other" -le "$MAX_OTHER" ] && break
		if [ "$attempt" -lt "$RETRIES" ]; then
			log "other work took ${other}% of the CPUs (> MAX_OTHER=$MAX_OTHER): run again"
		fi
	done
}

log "caches: ${PORTS[*]}; ringproxy :$RP_PORT haproxy :$HA_PORT nginx :$NG_PORT; NGINX cache in $NGX_CACHE"
log "$ROUNDS rounds; $SCENARIOS; ${CACHE_SIZE} caches; wrk -t$WRK_THREADS -c$CONNS ${WARM}s (then ${REWARM}s)+${SECS}s over $URLS URLs; ${SIZE} B bodies; $WORKERS workers"
read -r -a order <<<"$PROXIES"
for sc in $SCENARIOS; do
	: >"$TMP/runs-$sc.tsv"
	for r in $(seq "$ROUNDS"); do
		for k in $(seq 0 $((${#order[@]} - 1))); do
			p=${order[$(((k + r - 1) % ${#order[@]}))]}
			if [ "$sc" = viral-cold ]; then
				run_viral "$p" "$r"
			else
				run_load "$sc" "$p" "$r"
			fi
			cat "$TMP/run.tsv" >>"$TMP/runs-$sc.tsv"
		done
	done
done

# --- report --------------------------------------------------------------
has() { [[ " $PROXIES " == *" $1 "* ]]; }
# ratio A B: A / B to 2 decimals, "n/a" when B is absent or zero
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "" || b == "nan" || b + 0 == 0) print "n/a"; else printf "%.2f\n", a / b }'; }
# met COND: "yes"/"no" from an awk condition
met() { awk "BEGIN { print (($1) ? \"yes\" : \"no\") }"; }
# every_run FILE: the raw rows as a collapsed markdown table
every_run() {
	echo
	echo "<details><summary>every run</summary>"
	echo
	echo "| $1 |"
	echo "|$(sed 's/[^|]*|/---|/g' <<<"$1 |")"
	awk -F'\t' '{ printf "| %s |", $1; for (i = 2; i <= NF; i++) printf " %s |", $i; print "" }' "$2"
	echo
	echo "</details>"
}

echo
echo "## Hot-object cache: ringproxy vs HAProxy vs NGINX"
echo
echo "$ROUNDS rounds, order rotated per round; $CACHE_SIZE of cache each;" \
     "$WORKERS workers/threads each; 4 testcaches (--threads $TC_THREADS," \
     "${SIZE} B bodies, max-age=3600); NGINX keys_zone $NGX_KEYS;" \
     "$(nproc) CPUs shared by all. Medians over rounds."
declare -A med
for sc in $SCENARIOS; do
	runs=$TMP/runs-$sc.tsv
	echo
	if [ "$sc" = viral-cold ]; then
		echo "### viral-cold: $CLIENTS clients at once on one cold URL, backend delay $DELAY ms"
		echo
		echo "| proxy | backend fetches (each round) | slowest client ms | p50 client ms | all done ms | errors | bad bodies |"
		echo "|---|---:|---:|---:|---:|---:|---:|"
		for p in $PROXIES; do
			for c in 3 4 5 6; do med[$sc.$p.$c]=$(bench_median "$runs" "$p" $c); done
			f=$(awk -F'\t' -v p="$p" '$1 == p { printf "%s%d", (n++ ? ", " : ""), $3 }' "$runs")
			fmax=$(awk -F'\t' -v p="$p" '$1 == p && $3 > m { m = $3 } END { print m + 0 }' "$runs")
			fmin=$(awk -F'\t' -v p="$p" '$1 == p && (n++ == 0 || $3 < m) { m = $3 } END { print m + 0 }' "$runs")
			med[$sc.$p.fmax]=$fmax; med[$sc.$p.fmin]=$fmin
			e=$(awk -F'\t' -v p="$p" '$1 == p { t += $7 } END { print t + 0 }' "$runs")
			b=$(awk -F'\t' -v p="$p" '$1 == p { t += $8 } END { print t + 0 }' "$runs")
			awk -v l="${label[$p]}" -v f="$f" -v a="${med[$sc.$p.5]}" -v b="${med[$sc.$p.4]}" \
			    -v c="${med[$sc.$p.6]}" -v e="$e" -v bb="$b" 'BEGIN {
				printf "| %s | %s | %.1f | %.1f | %.1f | %d | %d |\n", l, f, a / 1000, b / 1000, c / 1000, e, bb }'
		done
		if has ringproxy; then
			echo
			echo "| ringproxy vs | ${label[haproxy]} | ${label[nginx]} | goal | met |"
			echo "|---|---:|---:|---|:-:|"
			R=ringproxy
			echo "| backend fetches (most in a round) | ${med[$sc.$R.fmax]} vs ${med[$sc.haproxy.fmax]:-n/a} | ${med[$sc.$R.fmax]} vs ${med[$sc.nginx.fmax]:-n/a} | exactly 1 | $(met "${med[$sc.$R.fmax]} == 1 && ${med[$sc.$R.fmin]} == 1") |"
			lim=$(awk -v d="$DELAY" 'BEGIN { print 1.3 * d }')
			echo "| slowest client | $(ratio "${med[$sc.$R.5]}" "${med[$sc.haproxy.5]:-}") | $(ratio "${med[$sc.$R.5]}" "${med[$sc.nginx.5]:-}") | ≤ $lim ms (1.3 × $DELAY ms) | $(met "${med[$sc.$R.5]} <= $lim * 1000") |"
			echo "| p50 client | $(ratio "${med[$sc.$R.4]}" "${med[$sc.haproxy.4]:-}") | $(ratio "${med[$sc.$R.4]}" "${med[$sc.nginx.4]:-}") | | |"
		fi
		if has ringproxy && has before; then
			echo
			echo "| ringproxy (this build) / before | ratio |"
			echo "|---|---:|"
			echo "| backend fetches (most in a round) | ${med[$sc.ringproxy.fmax]} vs ${med[$sc.before.fmax]} |"
			echo "| slowest client | $(ratio "${med[$sc.ringproxy.5]}" "${med[$sc.before.5]}") |"
		fi
		every_run "proxy | round | fetches | p50 µs | slowest µs | all done µs | errors | bad bodies | statuses" "$runs"
		continue
	fi
	if [ "$sc" = zipf ]; then
		echo "### zipf: s = $ZIPF_S over $URLS URLs"
	else
		echo "### hot50: half of the requests on one URL, the rest uniform over $URLS URLs"
	fi
	echo
	echo "wrk -t$WRK_THREADS -c$CONNS; ${WARM} s unmeasured before a proxy's first run (${REWARM} s before later rounds), then ${SECS} s measured per run."
	echo
	echo "| proxy | hit % | req/s | p50 ms | p99 ms | CPU µs/req | user µs/req | sys µs/req | RSS MiB | cache on tmpfs MiB (files) | errors | other CPU % (max) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for p in $PROXIES; do
		for c in 3 4 5 6 7 8 9 10 12 14 15; do med[$sc.$p.$c]=$(bench_median "$runs" "$p" $c); done
		omax=$(awk -F'\t' -v p="$p" '$1 == p && $11 > m { m = $11 } END { print m + 0 }' "$runs")
		awk -v l="${label[$p]}" -v a="${med[$sc.$p.3]}" -v b="${med[$sc.$p.4]}" -v c="${med[$sc.$p.5]}" \
		    -v d="${med[$sc.$p.6]}" -v e="${med[$sc.$p.7]}" -v f="${med[$sc.$p.8]}" \
		    -v g="${med[$sc.$p.9]}" -v h="${med[$sc.$p.10]}" -v o="$omax" \
		    -v hit="${med[$sc.$p.12]}" -v disk="${med[$sc.$p.14]}" -v files="${med[$sc.$p.15]}" 'BEGIN {
			dk = (disk >= 0 ? sprintf("%.1f (%d)", disk, files) : "—")
			printf "| %s | %.1f | %.0f | %.3f | %.3f | %.2f | %.2f | %.2f | %.1f | %s | %d | %d |\n",
			    l, hit, a, b / 1000, c / 1000, d, e, f, g, dk, h, o }'
	done
	if has ringproxy; then
		R=ringproxy
		echo
		echo "| ringproxy / | ${label[haproxy]} | ${label[nginx]} | goal | met |"
		echo "|---|---:|---:|---|:-:|"
		H=${med[$sc.haproxy.12]:-}; N=${med[$sc.nginx.12]:-}
		echo "| hit ratio | $(ratio "${med[$sc.$R.12]}" "$H") | $(ratio "${med[$sc.$R.12]}" "$N") | ≥ 1.10 × HAProxy, > NGINX | $(met "${med[$sc.$R.12]} >= 1.1 * ${H:-1e9} && ${med[$sc.$R.12]} > ${N:--1}") |"
		H=${med[$sc.haproxy.6]:-}; N=${med[$sc.nginx.6]:-}
		echo "| CPU per request | $(ratio "${med[$sc.$R.6]}" "$H") | $(ratio "${med[$sc.$R.6]}" "$N") | ≤ 0.80 × HAProxy | $(met "${med[$sc.$R.6]} <= 0.8 * ${H:--1}") |"
		H=${med[$sc.haproxy.5]:-}; N=${med[$sc.nginx.5]:-}
		echo "| p99 latency | $(ratio "${med[$sc.$R.5]}" "$H") | $(ratio "${med[$sc.$R.5]}" "$N") | ≤ 1.00 × both | $(met "${med[$sc.$R.5]} <= ${H:-1e18} && ${med[$sc.$R.5]} <= ${N:-1e18}") |"
		H=${med[$sc.haproxy.3]:-}; N=${med[$sc.nginx.3]:-}
		echo "| req/s | $(ratio "${med[$sc.$R.3]}" "$H") | $(ratio "${med[$sc.$R.3]}" "$N") | | |"
	fi
	if has ringproxy && has before; then
		echo
		echo "| ringproxy (this build) / before | ratio |"
		echo "|---|---:|"
		for m in "hit ratio:12" "CPU per request:6" "p99 latency:5" "req/s:3" "RSS:9"; do
			echo "| ${m%:*} | $(ratio "${med[$sc.ringproxy.${m#*:}]}" "${med[$sc.before.${m#*:}]}") |"
		done
	fi
	every_run "proxy | round | req/s | p50 µs | p99 µs | CPU µs/req | user | sys | RSS MiB | errors | other CPU % | hit % | backend requests | tmpfs MiB | tmpfs files | wrk CPU µs/req" "$runs"
done

# --- one table of the lot (tests/bench/README.md's) -------------------------
echo
echo "### Summary (medians)"
echo
echo "| scenario | proxy | backend fetches | slowest client ms | hit % | CPU µs/req | req/s | p99 ms | RSS MiB | cache on tmpfs MiB (files) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for sc in $SCENARIOS; do
	for p in $PROXIES; do
		if [ "$sc" = viral-cold ]; then
			f=$(awk -F'\t' -v p="$p" '$1 == p { printf "%s%d", (n++ ? ", " : ""), $3 }' "$TMP/runs-$sc.tsv")
			awk -v l="${label[$p]}" -v f="$f" -v a="${med[$sc.$p.5]:-0}" 'BEGIN {
				printf "| viral-cold | %s | %s | %.1f | | | | | | |\n", l, f, a / 1000 }'
		else
			awk -v sc="$sc" -v zs="$ZIPF_S" -v l="${label[$p]}" -v hit="${med[$sc.$p.12]:-0}" \
			    -v cpu="${med[$sc.$p.6]:-0}" -v rps="${med[$sc.$p.3]:-0}" -v p99="${med[$sc.$p.5]:-0}" \
			    -v rss="${med[$sc.$p.9]:-0}" -v disk="${med[$sc.$p.14]:--1}" -v files="${med[$sc.$p.15]:-0}" 'BEGIN {
				name = (sc == "zipf" ? "zipf " zs : sc)
				dk = (disk >= 0 ? sprintf("%.1f (%d)", disk, files) : "—")
				printf "| %s | %s | | | %.1f | %.2f | %.0f | %.3f | %.1f | %s |\n", name, l, hit, cpu, rps, p99 / 1000, rss, dk }'
		fi
	done
done
