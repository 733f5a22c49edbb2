#!/bin/bash
# tests/cachetests/run.sh -- ringproxy against the public HTTP cache test
# suite (npm http-cache-tests 0.4.5, the suite behind cache-tests.fyi):
# the suite's origin on loopback, ringproxy in front of it with that one
# backend, the suite's client against ringproxy; then score.mjs scores the
# results with the suite's own rules and prints ringproxy's row beside the
# rows the package publishes for other caches, the required failures and
# what the tests not reached depend on.
#
# Usage (from anywhere):
#   bash tests/cachetests/run.sh [RINGPROXY] [--no-fail] [--json FILE] [--expect FILE]
#   RINGPROXY   the binary (default $RINGPROXY, else build/src/ringproxy,
#               built with meson + ninja when it is the default)
#   --no-fail   exit 0 even when a required test fails
#   --expect    exit 0 when the required and setup failures are exactly
#               those FILE lists (tests/cachetests/expected.txt: CI)
#   --json      where the per-test results go (default
#               build/cachetests/ringproxy.json)
# Environment: CACHETESTS_DIR [build/cachetests] where the package is
# installed (never the source tree); KEEP=1 keeps the run's temp dir (the
# logs of the origin, the proxy and the client, and the raw results).
#
# The origin listens on every interface (node's server.listen(port)), so
# the whole scenario runs in a private network namespace (unshare --net, as
# root or in a user namespace) with only lo up: origin, proxy and client
# share it and nothing is reachable from outside. Ports come from the
# kernel (port 0) and are read from each process's log.
#
# The config is the one of issue 25: [cache] min_uses = 1 (the suite asks
# each URL a few times only) and [health] passive = off (the origin closes
# some connections and answers 999 on purpose; neither may take the only
# backend down). Everything else is the default.
#
# Exit status: 0 when every required test passed and the harness ran every
# test (or with --no-fail), 1 when a required test failed or a test could
# not be set up, 2 when the run itself failed (origin, proxy or client did
# not start or end, the proxy died).
set -euo pipefail

VERSION=0.4.5
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../bench/lib.sh
. "$ROOT/tests/bench/lib.sh"    # bench_stop

# --- inside the private network namespace -----------------------------------

# wait_line FILE REGEX SECONDS PID: the first group of the first line of
# FILE matching REGEX (sed -E), waiting up to SECONDS while PID runs; empty
# when none came.
wait_line() {
	local i m
	for ((i = 0; i < $3 * 20; i++)); do
		m=$(sed -nE "s#$2#\\1#p" "$1" 2>/dev/null | head -1)
		[ -n "$m" ] && { echo "$m"; return; }
		kill -0 "$4" 2>/dev/null || return 0
		sleep 0.05
	done
}

# scenario TMP SUITE RP: origin, proxy, client; the client's JSON goes to
# TMP/results.json. Every process started is stopped by its PID.
scenario() {
	local tmp=$1 suite=$2 rp=$3 op pp rc=0
	PIDS=()
	trap 'bench_stop "${PIDS[@]}"' EXIT
	trap 'exit 2' INT TERM
	ip link set lo up

	(cd "$suite" && exec env npm_config_protocol=http npm_config_port=0 \
		npm_config_pidfile="$tmp/origin.pid" node server/server.mjs) >"$tmp/origin.log" 2>&1 &
	PIDS+=($!)
	op=$(wait_line "$tmp/origin.log" '^Listening on http://.*:([0-9]+)/$' 20 $!)
	[ -n "$op" ] || { echo "the suite's origin did not start:" >&2; cat "$tmp/origin.log" >&2; return 2; }

	cat >"$tmp/ringproxy.ini" <<-EOF
	[proxy]
	listen = 127.0.0.1:0

	[cache]
	min_uses = 1

	[health]
	passive = off

	[backend origin]
	url = http://127.0.0.1:$op
	EOF
	"$rp" -c "$tmp/ringproxy.ini" </dev/null >/dev/null 2>"$tmp/ringproxy.log" &
	PIDS+=($!)
	local rpid=$!
	pp=$(wait_line "$tmp/ringproxy.log" '.*info: listening on 127\.0\.0\.1:([0-9]+) with.*' 30 "$rpid")
	[ -n "$pp" ] || { echo "ringproxy did not start:" >&2; cat "$tmp/ringproxy.log" >&2; return 2; }
	echo "origin 127.0.0.1:$op, ringproxy 127.0.0.1:$pp (pid $rpid); running the suite" >&2

	# the package's config as `npm run cli` passes it: an empty id runs every
	# test (cli.mjs reads npm_config_id || npm_package_config_id)
	(cd "$suite" && exec timeout --kill-after=5 600 env -u npm_config_id \
		npm_config_base="http://127.0.0.1:$pp" npm_package_config_id= \
		node --no-warnings cli.mjs) >"$tmp/results.json" 2>"$tmp/client.log" || rc=$?
	if [ "$rc" -ne 0 ] || [ -s "$tmp/client.log" ]; then
		echo "the suite's client failed (status $rc):" >&2
		tail -20 "$tmp/client.log" >&2
		return 2
	fi
	if ! kill -0 "$rpid" 2>/dev/null; then
		echo "ringproxy exited during the run:" >&2
		tail -20 "$tmp/ringproxy.log" >&2
		return 2
	fi
}

if [ "${1:-}" = --scenario ]; then
	scenario "$2" "$3" "$4"
	exit
fi

# --- outside: arguments, packages, the build, the suite ---------------------

RP=${RINGPROXY:-}
NOFAIL=0
JSON=
EXPECT=()
while [ $# -gt 0 ]; do
	case "$1" in
	--no-fail) NOFAIL=1 ;;
	--json) JSON=${2:?--json needs a file}; shift ;;
	--expect) EXPECT=(--expect "$(cd "$(dirname "${2:?--expect needs a file}")" && pwd)/$(basename "$2")"); shift ;;
	-*) echo "usage: bash tests/cachetests/run.sh [RINGPROXY] [--no-fail] [--json FILE] [--expect FILE]" >&2; exit 2 ;;
	*) RP=$1 ;;
	esac
	shift
done

bash "$ROOT/tests/deps.sh" cachetests
export PATH=$PATH:/usr/sbin:/sbin
if [ -z "$RP" ]; then
	[ -d "$ROOT/build" ] || meson setup "$ROOT/build" "$ROOT" >/dev/null
	ninja -C "$ROOT/build" >/dev/null    # a no-op when up to date; never a stale binary
	RP=$ROOT/build/src/ringproxy
	LABEL=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo build/src/ringproxy)
else
	LABEL=$RP
fi
[ -x "$RP" ] || { echo "$RP: not an executable" >&2; exit 2; }
RP=$(cd "$(dirname "$RP")" && pwd)/$(basename "$RP")

DIR=${CACHETESTS_DIR:-$ROOT/build/cachetests}
SUITE=$DIR/node_modules/http-cache-tests
JSON=${JSON:-$DIR/ringproxy.json}
mkdir -p "$DIR"
if [ "$(node -p "require('$SUITE/package.json').version" 2>/dev/null)" != "$VERSION" ]; then
	echo "installing http-cache-tests@$VERSION into $DIR" >&2
	timeout 300 npm install --prefix "$DIR" --no-audit --no-fund --no-save --no-package-lock \
		--loglevel=error "http-cache-tests@$VERSION" >&2
fi

TMP=$(mktemp -d /tmp/rp-cachetests.XXXXXX)
trap 'if [ "${KEEP:-0}" = 1 ]; then echo "# kept $TMP" >&2; else rm -rf "$TMP"; fi' EXIT

# root makes the namespace directly; anyone else through a user namespace
ns=(unshare --net)
[ "$(id -u)" -eq 0 ] || ns=(unshare --user --map-root-user --net)
timeout --kill-after=10 900 "${ns[@]}" bash "$HERE/run.sh" --scenario "$TMP" "$SUITE" "$RP" || exit 2

rc=0
node "$HERE/score.mjs" "$SUITE" "$TMP/results.json" "ringproxy ($LABEL)" --json "$JSON" "${EXPECT[@]}" || rc=$?
echo "per-test results: $JSON" >&2
[ "$rc" -eq 2 ] && exit 2
[ "$NOFAIL" = 1 ] && exit 0
exit "$rc"
