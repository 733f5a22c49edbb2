#!/bin/bash
# tests/bench/ramp.sh -- the warm ramp ([ring] ramp) with real caches: five
# Varnish 7.1 caches (Debian's varnishd, -s malloc,64m, the project's VCL,
# tests/e2e/varnish.vcl) in front of an origin that counts its fetches (a
# testcache: /__series gives its requests per 100 ms as it saw them, and
# --count-prefix tells the Zipf keys' fetches from the rest).
# Four caches take a Zipf workload through ringproxy and are warmed with
# every key; then, under the same steady load, a fifth is added by reload,
# once with ramp = 0 and once with ramp = RAMP. For each run: the origin's
# requests per second around the change, its steady rate, its peak over
# that rate, and the extra misses (fetches of the Zipf keys after the
# change: the moved keys the new cache had to fetch). Prints the table,
# writes the per-second series (CSV) and a plot of both runs (SVG).
#
# Everything on 127.0.0.1, ports from the kernel, every process stopped by
# its PID (varnishd by its process group, whose id is its PID).
#
# usage: bash tests/bench/ramp.sh
# knobs (environment; defaults in brackets, modest for a small machine):
#   RAMP      ramp window, seconds [60]      STEADY  seconds before the change [20]
#   TAIL      seconds after the window [30]  RATE    requests per second [2000]
#   KEYS      Zipf keys [2000]               ZIPF    Zipf exponent s [0.9]
#   ONEHIT    share of requests for keys seen once, the origin's steady misses [0.005]
#   CONNS     wrk connections, each paced to RATE / CONNS [200]: many slow
#             connections, so that slower misses hardly slow the arrivals
#   SVG       the plot [BUILD/ramp.svg] (the CSV of both series beside it)
# a quick run: RAMP=20 STEADY=10 TAIL=15 bash tests/bench/ramp.sh
set -euo pipefail

. "$(dirname "$0")/lib.sh"
bench_init ramp
cd "$ROOT"
command -v varnishd >/dev/null || { echo "ramp.sh: varnishd not found (Debian package varnish)" >&2; exit 1; }

export RAMP=${RAMP:-60} STEADY=${STEADY:-20} TAIL=${TAIL:-30} RATE=${RATE:-2000}
export KEYS=${KEYS:-2000} ZIPF=${ZIPF:-0.9} ONEHIT=${ONEHIT:-0.005} CONNS=${CONNS:-200}
SVG=${SVG:-$BUILD/ramp.svg}

# the driver stops what it starts; it is stopped by its PID like the rest
python3 "$ROOT/tests/bench/ramp.py" --ringproxy "$RP" --testcache "$TC" --tmp "$TMP" \
	--vcl "$ROOT/tests/e2e/varnish.vcl" --svg "$SVG" &
PIDS+=($!)
wait "${PIDS[-1]}"
