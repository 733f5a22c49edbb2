#!/bin/bash
# tests/bench/replicas.sh -- issue 29 against real caches: what [ring]
# replicas saves when a cache dies. Four Varnish 7.1 caches (Debian's
# varnishd, tests/e2e/varnish.vcl) in front of one origin (a testcache
# answering after DELAY ms, counting its fetches of the Zipf URLs),
# ringproxy with its own cache off. For R = 1 and R = 2: fresh caches,
# warmed with every URL once through the proxy and WARM_SECS of the load
# (which fills the replicas: requests one at a time go to the primary),
# then SECS of steady Zipf load (tests/bench/zipf.lua) at CLIENTS
# connections, then kill -9 of one varnishd and SECS more; prints the
# origin's fetches in both windows, the extra ones the kill cost (the
# second window's less the steady rate) and the failed requests.
# Then the tier hit ratio at equal memory, smaller than the URL set: an
# origin answering OBJ bytes, four varnishd with SIZE = malloc of FIT of
# the URL set / 4 each; R = 1 and R = 2 at SIZE and R = 1 at SIZE / 2 (a
# tier holding each key twice holds half as many: the prediction for R =
# 2), each fresh, FWARM_SECS of the load, then FSECS measured; the
# ratios, and whether R = 2 is within 2 points of R = 1 at SIZE / 2.
#
# usage: bash tests/bench/replicas.sh
# knobs: MODE [all; kill, footprint: one table] SECS [30] CLIENTS [64]
#        KEYS [20000] ZIPF [0.9] DELAY [2] WARM_SECS [30] WORKERS [2]
#        OBJ [8192] FIT [0.333] FSECS [20] FWARM_SECS [20] KEEP
set -euo pipefail

. "$(dirname "$0")/lib.sh"
bench_init replicas
cd "$ROOT"
command -v varnishd >/dev/null || { echo "replicas.sh: varnishd not found (Debian package varnish)" >&2; exit 1; }
export SECS=${SECS:-30} CLIENTS=${CLIENTS:-64} KEYS=${KEYS:-20000} ZIPF=${ZIPF:-0.9} DELAY=${DELAY:-2}
export WARM_SECS=${WARM_SECS:-30} WORKERS=${WORKERS:-2}
export OBJ=${OBJ:-8192} FIT=${FIT:-0.333} FSECS=${FSECS:-20} FWARM_SECS=${FWARM_SECS:-20}
MODE=${MODE:-all}
case $MODE in
all) RUNS=(--replicas 1 --replicas 2 --footprint) ;;
kill) RUNS=(--replicas 1 --replicas 2) ;;
footprint) RUNS=(--footprint) ;;
*) echo "replicas.sh: MODE is all, kill or footprint, not '$MODE'" >&2; exit 2 ;;
esac

# the driver stops what it starts; it is stopped by its PID like the rest
python3 "$ROOT/tests/bench/replicas.py" --ringproxy "$RP" --testcache "$TC" --tmp "$TMP" \
	--vcl "$ROOT/tests/e2e/varnish.vcl" --lua "$ROOT/tests/bench/zipf.lua" "${RUNS[@]}" &
PIDS+=($!)
wait "${PIDS[-1]}"
