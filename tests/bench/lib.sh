# tests/bench/lib.sh -- what every benchmark script here starts with: the
# packages, an up-to-date release build, a temp dir, and test caches on free
# 127.0.0.1 ports; every process started is stopped by its PID on exit.
# Sourced, not run:  . "$(dirname "$0")/lib.sh"; bench_init NAME

# bench_init NAME [DEPS]: installs the packages of tests/deps.sh DEPS
# (default bench), sets ROOT, BUILD (default ROOT/build-rel), RP, TC, TMP and
# PIDS, and traps EXIT to stop PIDS (TERM, then KILL after 5 s) and remove
# TMP (kept with KEEP=1).
bench_init() {
	ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	BUILD=${BUILD:-$ROOT/build-rel}
	bash "$ROOT/tests/deps.sh" "${2:-bench}"
	export PATH=$PATH:/usr/sbin:/sbin
	[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" "$ROOT" -Dbuildtype=release -Dfuzz=disabled -Dtests=enabled >/dev/null
	# the test cache and the bench programs: a release build has them
	# only with -Dtests=enabled; one made before the option existed knows
	# no such option until it is set up again
	meson configure "$BUILD" -Dtests=enabled >/dev/null 2>&1 ||
		meson setup --reconfigure "$BUILD" "$ROOT" -Dtests=enabled >/dev/null
	ninja -C "$BUILD" >/dev/null    # a no-op when up to date; never a stale binary
	RP=$BUILD/src/ringproxy
	TC=$BUILD/tests/testcache/testcache
	TMP=$(mktemp -d "/tmp/rp-bench-$1.XXXXXX")
	chmod 755 "$TMP"        # NGINX workers may run as another user
	PIDS=()
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}

bench_cleanup() {
	bench_stop "${PIDS[@]}"
	wait 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "# kept $TMP" >&2; else rm -rf "$TMP"; fi
}

# bench_stop PID...: TERM to each, then KILL to those still running 5 s
# later (tests/cachetests/run.sh stops its processes with it too).
bench_stop() {
	local p
	for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "$@"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
}

# bench_caches FIRST LAST [testcache options]: test caches cache-FIRST ..
# cache-LAST on ports from the kernel, each answering before this returns;
# PORTS[i] is the port of cache-i.
bench_caches() {
	local first=$1 last=$2 i
	shift 2
	PORTS=()
	for ((i = first; i <= last; i++)); do
		"$TC" --listen 127.0.0.1:0 --name "cache-$i" --port-file "$TMP/cache-$i.port" "$@" \
			>"$TMP/cache-$i.log" 2>&1 &
		PIDS+=($!)
	done
	for ((i = first; i <= last; i++)); do
		for _ in $(seq 200); do [ -s "$TMP/cache-$i.port" ] && break; sleep 0.05; done
		[ -s "$TMP/cache-$i.port" ] || { echo "cache-$i did not start" >&2; exit 1; }
		PORTS[i]=$(cat "$TMP/cache-$i.port")
	done
}

# --- the peers' configs: shared by compare.sh, cache.sh and floor.sh ---------

# bench_haproxy_head: HAProxy's global and defaults sections, WORKERS
# threads, keep-alive to the servers (http-reuse always).
bench_haproxy_head() {
	cat <<EOF
global
	nbthread $WORKERS
	maxconn 4096
defaults
	mode http
	timeout connect 1s
	timeout client 30s
	timeout server 10s
	http-reuse always
EOF
}

# bench_nginx_head: the top of an NGINX config run from TMP/nginx, WORKERS
# worker processes, up to inside its http block (no access log, client
# keep-alive not closed every 1000 requests); the caller adds the rest and
# the closing brace.
bench_nginx_head() {
	[ "$(id -u)" -eq 0 ] && echo "user root;"
	cat <<EOF
worker_processes $WORKERS;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 10240; }
http {
	access_log off;
	client_body_temp_path $TMP/nginx/body;
	proxy_temp_path $TMP/nginx/proxy;
	keepalive_requests 1000000;
EOF
}

# --- measuring: shared by compare.sh and cache.sh ----------------------------

# bench_free_ports N: N free ports from the kernel (bind to port 0),
# printed space-separated.
bench_free_ports() {
	python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])' "$1"
}

# bench_wait_http PORT PATH [PID]: wait until http://127.0.0.1:PORT/PATH
# answers (any status), at most 10 s; exits the script if it does not, or
# as soon as PID (the server's) has died.
bench_wait_http() {
	local i
	for i in $(seq 100); do
		curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1$2" && return 0
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			echo "pid $3 exited before answering on 127.0.0.1:$1 (logs in $TMP)" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "nothing answers on 127.0.0.1:$1 (logs in $TMP)" >&2
	exit 1
}

# bench_wait_h2 URL PID [TRIES]: returns once an HTTP/2 GET of URL/__up
# answers (TLS with ALPN h2 for https://, else prior knowledge), every
# 0.1 s up to TRIES [100] times; exits if PID ends or nothing answers.
bench_wait_h2() {
	local i how=--http2-prior-knowledge
	[ "${1#https:}" != "$1" ] && how=--http2
	for i in $(seq "${3:-100}"); do
		curl -sk -o /dev/null --max-time 2 "$how" "$1/__up" && return 0
		if ! kill -0 "$2" 2>/dev/null; then
			echo "pid $2 exited before answering on $1 (logs in $TMP)" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "nothing answers HTTP/2 on $1 (logs in $TMP)" >&2
	exit 1
}

# bench_h2_proxy NAME MODE SCHEME: ringproxy, haproxy or nginx serving
# HTTP/2 on PORT (h2c, or TLS with ALPN h2 when SCHEME is tls, with
# $TMP/tls/10-bench.pem, or c.crt and k.key for NGINX), WORKERS threads or
# processes, in front of the test cache on port BE; MODE forward (no cache)
# or hit (each one's cache). Sets PORT, URL and PP (its PIDs, also in
# PIDS). For h2.sh and h2flood.sh.
bench_h2_proxy() {
	local name=$1 mode=$2 scheme=$3 cache listen tls="" hbind ngl
	read -r PORT PLAIN <<<"$(bench_free_ports 2)"
	URL=http://127.0.0.1:$PORT listen=$PORT hbind="proto h2" ngl="http2"
	if [ "$scheme" = tls ]; then
		URL=https://127.0.0.1:$PORT listen=$PLAIN
		tls="[tls]
listen = 127.0.0.1:$PORT
certs = $TMP/tls/*.pem"
		hbind="ssl crt $TMP/tls/10-bench.pem alpn h2,http/1.1"
		ngl="ssl http2; ssl_certificate $TMP/tls/c.crt; ssl_certificate_key $TMP/tls/k.key"
	fi
	case $name in
	ringproxy)
		cache="size = 0"
		[ "$mode" = hit ] && cache="size = 64m
min_uses = 1"
		cat >"$TMP/rp.ini" <<EOF
[proxy]
listen = 127.0.0.1:$listen
workers = $WORKERS
# 1000 streams in flight need as many backend connections: kept, not
# reopened (HAProxy keeps its idle ones too)
pool_size = 1024
[cache]
$cache
# h2load does not reconnect after a GOAWAY (NGINX's keepalive_requests is
# raised the same way in lib.sh)
[h2]
max_requests = 100000000
[backend cache-0]
url = http://127.0.0.1:$BE
$tls
EOF
		"$RP" -c "$TMP/rp.ini" 2>"$TMP/rp.log" &
		PP=($!) ;;
	haproxy)
		{
			bench_haproxy_head
			[ "$mode" = hit ] && printf 'cache c\n\ttotal-max-size 64\n\tmax-age 3600\n'
			printf 'frontend f\n\tbind 127.0.0.1:%s %s\n\tdefault_backend b\n' "$PORT" "$hbind"
			printf 'backend b\n'
			[ "$mode" = hit ] && printf '\thttp-request cache-use c\n\thttp-response cache-store c\n'
			printf '\tserver s 127.0.0.1:%s\n' "$BE"
		} >"$TMP/haproxy.cfg"
		haproxy -f "$TMP/haproxy.cfg" -db >"$TMP/haproxy.log" 2>&1 &
		PP=($!) ;;
	nginx)
		{
			bench_nginx_head
			[ "$mode" = hit ] && echo "proxy_cache_path $TMP/nginx/cache keys_zone=c:10m;"
			echo "upstream b { server 127.0.0.1:$BE; keepalive 64; }"
			echo "server { listen 127.0.0.1:$PORT $ngl; location / { proxy_pass http://b;"
			echo "proxy_http_version 1.1; proxy_set_header Connection \"\";"
			[ "$mode" = hit ] && echo "proxy_cache c; proxy_cache_valid 200 1h;"
			echo "} } }"
		} >"$TMP/nginx/nginx.conf"
		nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" >"$TMP/nginx.log" 2>&1 &
		PP=($!) ;;
	esac
	PIDS+=("${PP[@]}")
	# HAProxy's "proto h2" bind speaks only HTTP/2: ask in it
	bench_wait_h2 "$URL" "${PP[0]}"
	# NGINX's workers are its master's children
	if [ "$name" = nginx ]; then
		sleep 0.3
		PP+=($(pgrep -P "${PP[0]}" || true))
	fi
}

# bench_cpu_ticks PID...: "utime stime" in clock ticks, summed.
bench_cpu_ticks() {
	local u=0 s=0 p line f
	for p in "$@"; do
		line=$(cat /proc/"$p"/stat 2>/dev/null) || continue
		read -r -a f <<<"${line##*) }"   # f[0] is field 3 (state)
		u=$((u + f[11])); s=$((s + f[12]))
	done
	echo "$u $s"
}

# bench_cpu_ns PID...: nanoseconds on CPU of all their threads, summed:
# exact, where utime/stime come in clock ticks.
bench_cpu_ns() {
	# a process that has exited is skipped (its missing file must not
	# fail the pipeline under set -o pipefail)
	{ cat $(for p in "$@"; do echo /proc/"$p"/task/*/schedstat; done) 2>/dev/null || true; } |
	    awk '{ t += $1 } END { printf "%.0f\n", t }'
}

# bench_rss_kib PID...: VmRSS in KiB, summed.
bench_rss_kib() {
	local t=0 p v
	for p in "$@"; do
		v=$(awk '/^VmRSS:/ {print $2}' /proc/"$p"/status 2>/dev/null) || continue
		t=$((t + ${v:-0}))
	done
	echo "$t"
}

# bench_sys_ticks: "busy total" clock ticks of the whole machine from
# /proc/stat (busy = user + nice + system; total includes idle, iowait, irq,
# softirq, steal).
bench_sys_ticks() {
	awk '/^cpu / { print $2 + $3 + $4, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat
}

# bench_child_ticks: CPU ticks of this shell's reaped children (wrk among
# them).
bench_child_ticks() {
	local f line
	line=$(cat /proc/$$/stat)
	read -r -a f <<<"${line##*) }"
	echo $((f[13] + f[14]))
}

# bench_quiet: wait (at most QUIET_WAIT s, default 30; 0: don't) until the
# machine is busy less than QUIET_PCT % (default 10) over one second while
# our processes are idle: other people's builds on a shared box are the
# biggest source of noise.
bench_quiet() {
	local i b0 t0 b1 t1 wait=${QUIET_WAIT:-30} pct=${QUIET_PCT:-10}
	[ "$wait" -gt 0 ] || return 0
	for i in $(seq "$wait"); do
		read -r b0 t0 <<<"$(bench_sys_ticks)"; sleep 1; read -r b1 t1 <<<"$(bench_sys_ticks)"
		[ $(((b1 - b0) * 100)) -lt $((pct * (t1 - t0))) ] && return 0
	done
	echo "# machine still busy after ${wait}s; measuring anyway" >&2
}

# bench_kv KEY LINE: the number after " KEY=" in LINE (a RESULT line).
bench_kv() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<" $2"; }

# bench_median FILE NAME COLUMN: the median of COLUMN (1-based) over the
# rows of the tab-separated FILE whose first column is NAME; nan if none.
bench_median() {
	awk -F'\t' -v p="$2" -v c="$3" '$1 == p { print $c }' "$1" | sort -g |
	    awk '{ v[NR] = $1 } END { if (NR == 0) print "nan";
		else if (NR % 2) print v[(NR + 1) / 2];
		else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
