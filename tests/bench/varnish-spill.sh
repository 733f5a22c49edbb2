#!/bin/bash
# tests/bench/varnish-spill.sh -- issue 17 against real caches: what the
# bounded-load cap's spills cost in origin fetches. Four Varnish 7.1 caches
# (Debian's varnishd, the project's VCL, tests/e2e/varnish.vcl) in front of
# one origin (a testcache answering after DELAY ms, counting its fetches
# of the Zipf URLs), ringproxy with its own cache off and the default
# balance_factor. For each build: fresh caches, warmed with every URL once
# through the proxy, then SECS of steady Zipf load (tests/bench/zipf.lua)
# at CLIENTS connections; prints the origin's fetches during the steady
# load, the share of requests the proxy sent to a cache that was not the
# key's owner (/stats spilled_in, and spilled_hot where the build has it),
# and req/s.
#
# The rule before issue 17 (every key moved by the cap) is the build of
# main before the hot-key rule was merged: BASE=DIR names its build
# directory; without it the script builds it in its temp dir from git
# (OLD_REV, default the first parent of the merge of branch 'hot').
#
# usage: bash tests/bench/varnish-spill.sh
# knobs: SECS [60] CLIENTS [64] KEYS [20000] ZIPF [0.9] DELAY [2]
#        WARM_SECS (extra seconds of the load before measuring) [0]
#        WORKERS [2] BASE OLD_REV KEEP
#        REVERSE=1 runs today's rule first (on a busy machine, req/s depend
#        on what else ran meanwhile; the counts hardly do)
set -euo pipefail

. "$(dirname "$0")/lib.sh"
bench_init varnish-spill
cd "$ROOT"
command -v varnishd >/dev/null || { echo "varnish-spill.sh: varnishd not found (Debian package varnish)" >&2; exit 1; }
export SECS=${SECS:-60} CLIENTS=${CLIENTS:-64} KEYS=${KEYS:-20000} ZIPF=${ZIPF:-0.9} DELAY=${DELAY:-2}
export WARM_SECS=${WARM_SECS:-0} WORKERS=${WORKERS:-2}

if [ -z "${BASE:-}" ]; then
	OLD_REV=${OLD_REV:-$(git -C "$ROOT" log --format=%H --grep="^Merge branch 'hot'" -1)^1}
	mkdir "$TMP/base-src"
	git -C "$ROOT" archive "$OLD_REV" | tar -x -C "$TMP/base-src"
	BASE=$TMP/base-src/build
	meson setup "$BASE" "$TMP/base-src" -Dbuildtype=release -Dfuzz=disabled >/dev/null
fi
ninja -C "$BASE" >/dev/null

# the driver stops what it starts; it is stopped by its PID like the rest
OLD="before issue 17: every key moved by the cap=$BASE/src/ringproxy"
NEW="hot keys (and rare ones only under a viral key)=$RP"
if [ "${REVERSE:-0}" = 1 ]; then ORDER=(--build "$NEW" --build "$OLD"); else ORDER=(--build "$OLD" --build "$NEW"); fi
python3 "$ROOT/tests/bench/varnish-spill.py" --testcache "$TC" --tmp "$TMP" \
	--vcl "$ROOT/tests/e2e/varnish.vcl" --lua "$ROOT/tests/bench/zipf.lua" "${ORDER[@]}" &
PIDS+=($!)
wait "${PIDS[-1]}"
