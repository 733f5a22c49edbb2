#!/bin/bash
# tests/bench/migrate.sh -- switching a warm tier from NGINX to ringproxy
# with real caches: five Varnish 7.1 caches (Debian's varnishd,
# -s malloc,64m, the project's VCL, tests/e2e/varnish.vcl; mixed weights)
# in front of an origin that counts its fetches (a testcache: /__series
# gives its requests per 100 ms, and --count-prefix tells the fetches of
# the warmed thumbnails from the rest) take a paced Zipf load from wrk.
#
# The switch: the caches are warmed behind Debian's NGINX (upstream
# hash $request_uri consistent, a server line a cache), then the clients
# move to ringproxy, once with its native ring and once with
# [ring] scheme = nginx (the INI from `ringproxy import nginx`, written
# the same way where the build has no importer); a third run stays on
# NGINX: the same load with no switch, the steady misses. For each: the
# origin's fetches in the MIGRATE_SECONDS after the move, those of warmed
# thumbnails, the extra ones over no switch (goal with scheme = nginx: 0).
# The move: caches warmed behind ringproxy with scheme = nginx, then a
# reload to scheme = ringproxy under the load, once with ramp = 0 and once
# with [ring] ramp = RAMP; the origin's peak second and its total after
# the reload (goal: peak over steady with the ramp <= 1/5 of without).
# A build that refuses scheme = nginx runs the first two runs only and
# says so. Prints the tables and a verdict per goal.
#
# Everything on 127.0.0.1, ports from the kernel, every process stopped by
# its PID (varnishd and NGINX by their process group).
#
# usage: bash tests/bench/migrate.sh    (about 6 minutes)
# knobs (environment; defaults in brackets, modest for a small machine):
#   MIGRATE_SECONDS  seconds counted after the switch [60]; 10 for a smoke run
#   RAMP      ramp window of the move, seconds [MIGRATE_SECONDS / 2]
#   TAIL      seconds counted after the ramp [MIGRATE_SECONDS / 6]
#   STEADY    seconds of load before the switch or reload [8]
#   RATE      requests per second [2000]    KEYS  Zipf keys [2000]
#   ZIPF      Zipf exponent s [0.9]
#   ONEHIT    share of requests for keys seen once, the steady misses [0.005]
#   CONNS     wrk connections, each paced to RATE / CONNS [200]
#   WEIGHTS   the caches' weights, one a cache ["2 1 1 1 1"]
# a quick run: MIGRATE_SECONDS=10 bash tests/bench/migrate.sh
set -euo pipefail

. "$(dirname "$0")/lib.sh"
bench_init migrate
cd "$ROOT"
for c in varnishd nginx wrk; do
	command -v "$c" >/dev/null || { echo "migrate.sh: $c not found (bash tests/deps.sh bench)" >&2; exit 1; }
done

export MIGRATE_SECONDS=${MIGRATE_SECONDS:-60}
export RAMP=${RAMP:-$((MIGRATE_SECONDS / 2))} TAIL=${TAIL:-$(((MIGRATE_SECONDS + 5) / 6))}
export STEADY=${STEADY:-8} RATE=${RATE:-2000} KEYS=${KEYS:-2000} ZIPF=${ZIPF:-0.9}
export ONEHIT=${ONEHIT:-0.005} CONNS=${CONNS:-200} WEIGHTS=${WEIGHTS:-2 1 1 1 1}

# the driver stops what it starts; it is stopped by its PID like the rest
python3 "$ROOT/tests/bench/migrate.py" --ringproxy "$RP" --testcache "$TC" --tmp "$TMP" \
	--vcl "$ROOT/tests/e2e/varnish.vcl" &
PIDS+=($!)
wait "${PIDS[-1]}"
