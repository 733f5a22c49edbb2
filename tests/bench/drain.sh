#!/bin/bash
# tests/bench/drain.sh -- taking a cache out at runtime (ringproxy ctl)
# with real caches: four Varnish 7.1 caches (Debian's varnishd, -s
# malloc,64m, the project's VCL, tests/e2e/varnish.vcl) in front of an
# origin that counts its fetches (a testcache: /__series gives its
# requests per 100 ms, --count-prefix tells the Zipf keys' fetches from
# the rest). The four take a Zipf workload through ringproxy and are warmed
# with every key; then, under the same steady, bounded load (wrk paced at
# RATE), one of them is taken out with `ringproxy ctl`, once with
# `maint` (its keys move at once) and once with `drain NAME DRAIN` (they
# move over the window, each still served by the draining cache until its
# moment). For each run: the client requests that failed (wrk's non-2xx
# and socket errors; goal 0), the origin's steady fetches per second, its
# peak second after the change and that peak over the steady rate, and
# the extra fetches of the Zipf keys (the moved keys the other caches had
# to fetch). Goal: the drain's peak at most a fifth of maint's.
#
# Everything on 127.0.0.1, ports from the kernel, every process stopped by
# its PID (varnishd by its process group, whose id is its PID).
#
# usage: bash tests/bench/drain.sh
# knobs (environment; defaults in brackets, modest for a small machine):
#   DRAIN     the drain's window, seconds [60]  STEADY  seconds before the change [20]
#   TAIL      seconds after the window [20]     RATE    requests per second [2000]
#   KEYS      Zipf keys [2000]                  ZIPF    Zipf exponent s [0.9]
#   ONEHIT    share of requests for keys seen once, the origin's steady misses [0.005]
#   CONNS     wrk connections, each paced to RATE / CONNS [200]
# a quick run: DRAIN=20 STEADY=10 TAIL=10 bash tests/bench/drain.sh
set -euo pipefail

. "$(dirname "$0")/lib.sh"
bench_init drain
cd "$ROOT"
command -v varnishd >/dev/null || { echo "drain.sh: varnishd not found (Debian package varnish)" >&2; exit 1; }

export DRAIN=${DRAIN:-60} STEADY=${STEADY:-20} TAIL=${TAIL:-20} RATE=${RATE:-2000}
export KEYS=${KEYS:-2000} ZIPF=${ZIPF:-0.9} ONEHIT=${ONEHIT:-0.005} CONNS=${CONNS:-200}

# the driver stops what it starts; it is stopped by its PID like the rest
python3 "$ROOT/tests/bench/drain.py" --ringproxy "$RP" --testcache "$TC" --tmp "$TMP" \
	--vcl "$ROOT/tests/e2e/varnish.vcl" &
PIDS+=($!)
wait "${PIDS[-1]}"
