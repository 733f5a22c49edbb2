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
	[ -d "$BUILD" ] || meson setup "$BUILD" "$ROOT" -Dbuildtype=release -Dfuzz=disabled >/dev/null
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
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "# kept $TMP" >&2; else rm -rf "$TMP"; fi
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
