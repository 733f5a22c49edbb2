#!/bin/bash
# tests/bench/h2flood.sh -- the HTTP/2 floods of issue 37 against ringproxy,
# HAProxy and NGINX side by side (h2c with prior knowledge, one worker,
# thread or process each, defaults otherwise, in front of one test cache
# with 4 KiB bodies). Per proxy and attack (h2flood.py): how the first
# attacking connection ended and when; how many of the attack's
# connections ended within 10 s; the requests the attack cost the backend
# (the test cache's count over the attack); and another client's p99
# while the attack runs against its p99 alone (h2load -c 2 -m 10, N
# forwarded requests: the backend is in their path).
#
# Attacks: rapid-reset (10,000 HEADERS+RST_STREAM), continuation (10,000
# CONTINUATION), ping, settings (10,000 each), header-bomb (a block of
# 10,000 fields), zero-window (100 streams under a window of 0, held).
#
# Usage (from the source tree): bash tests/bench/h2flood.sh
# Environment: PROXIES ["ringproxy haproxy nginx"], ATTACKS [all six],
# SECONDS_EACH [3] (how long each attack repeats, on new connections, at
# most 50), N [20000] the other client's requests.
# Every load is bounded (h2load -n, the attacker's count and time);
# every process started is stopped by PID (lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init h2flood
command -v h2load >/dev/null || { echo "h2load missing (nghttp2-client)" >&2; exit 1; }

PROXIES=${PROXIES:-ringproxy haproxy nginx}
ATTACKS=${ATTACKS:-rapid-reset continuation ping settings header-bomb zero-window}
SECONDS_EACH=${SECONDS_EACH:-3}
N=${N:-20000}
WORKERS=1

bench_caches 0 0 --size 4096
BE=${PORTS[0]}
mkdir -p "$TMP/nginx/cache"
for i in $(seq 0 9999); do echo "/victim/$i/1_200x200.jpg"; done >"$TMP/urls"

# backend_requests: the test cache's request count
backend_requests() {
	curl -s "http://127.0.0.1:$BE/__stats" | sed -n 's/.*"requests": *\([0-9]*\).*/\1/p'
}

# victim_p99: p99 in ms of N forwards by another client (h2load -c 2 -m 10)
victim_p99() {
	timeout 120 h2load -c 2 -m 10 -n "$N" -i "$TMP/urls-run" --log-file="$TMP/victim.log" >/dev/null
	awk '{ print $3 }' "$TMP/victim.log" | sort -n |
		awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.2f", v[i] / 1000 }'
}

printf 'proxy\tattack\toutcome (first connection)\tafter s\tconnections ended / made\tbackend requests\tvictim p99 ms alone\tunder attack\n' \
	>"$TMP/results.tsv"
for name in $PROXIES; do
	bench_h2_proxy "$name" forward h2c
	sed "1s|^|$URL|" "$TMP/urls" >"$TMP/urls-run"
	timeout 120 h2load -c 2 -m 10 -n 2000 -i "$TMP/urls-run" >/dev/null     # warm
	for attack in $ATTACKS; do
		alone=$(victim_p99)
		b0=$(backend_requests)
		timeout 120 /usr/bin/python3 "$ROOT/tests/bench/h2flood.py" "$PORT" "$attack" "$SECONDS_EACH" \
			>"$TMP/attack.out" 2>"$TMP/attack.err" &
		apid=$!
		sleep 0.2
		under=$(victim_p99)
		wait "$apid" || { echo "# $name $attack: the attacker failed:" >&2; cat "$TMP/attack.err" >&2; }
		b1=$(backend_requests)
		read -r _ conns ended outcome t <"$TMP/attack.out" || true
		printf '%s\t%s\t%s\t%s\t%s / %s\t%s\t%s\t%s\n' "$name" "$attack" "${outcome#outcome=}" "${t#t=}" \
			"${ended#ended=}" "${conns#conns=}" "$((b1 - b0 - N))" "$alone" "$under" >>"$TMP/results.tsv"
	done
	bench_stop "${PP[@]}"
done
echo "# commit $(git -C "$ROOT" rev-parse --short HEAD), SECONDS_EACH=$SECONDS_EACH N=$N"
cat "$TMP/results.tsv"
