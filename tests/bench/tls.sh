#!/bin/bash
# tests/bench/tls.sh -- HTTPS on the client side, ringproxy beside HAProxy
# and NGINX (Debian's), each with one worker and the same ECDSA P-256
# certificate, in front of one testcache (4 KiB bodies):
#   1. keep-alive HTTPS (wrk over TLS, one URL): CPU per request and p99,
#      each forwarding to the cache; ringproxy also answering from its cache
#      (a hit);
#   2. full TLS 1.2 handshakes (openssl s_time -new) and 3. resumed ones
#      (s_time -reuse): handshakes per second of the server's CPU;
#   4. memory per idle TLS connection: RSS after IDLE connections each
#      made a request and went idle, less RSS before, over IDLE (1000 by
#      default: every server keeps free lists and pools of a fixed size,
#      which a few hundred connections do not amortize).
#
# Usage (from the source tree):
#   bash tests/bench/tls.sh [BUILD_DIR]          # default: build-rel
#   DURATION=10 CONNS=16 IDLE=1000 bash tests/bench/tls.sh
#
# CPU is the server's own (all its threads, /proc schedstat), so the ratios
# hold on a loaded machine better than req/s do; p99 does not. Every load is
# bounded by `timeout`; every process started is stopped by PID.
set -euo pipefail

DURATION=${DURATION:-8}
CONNS=${CONNS:-16}
IDLE=${IDLE:-1000}
WORKERS=1

[ -n "${1:-}" ] && BUILD=$1
. "$(dirname "$0")/lib.sh"
bench_init tls
command -v openssl >/dev/null || { echo "tls.sh: needs openssl" >&2; exit 1; }

bench_caches 1 1 --size 4096
CP=${PORTS[1]}
bench_wait_http "$CP" /__stats

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost" -keyout "$TMP/key.pem" -out "$TMP/crt.pem" 2>/dev/null
cat "$TMP/crt.pem" "$TMP/key.pem" >"$TMP/both.pem"
read -r RPP RPH HAP NGP <<<"$(bench_free_ports 4)"

# ringproxy: forward (cache off) on RPP; a second one with its cache on RPH
for mode in fwd hit; do
	port=$RPP size=0
	[ $mode = hit ] && port=$RPH size=64m
	cat >"$TMP/rp-$mode.ini" <<EOF
[proxy]
listen = 127.0.0.1:0
workers = 1
[tls]
listen = 127.0.0.1:$port
certs = $TMP/both.pem
[cache]
size = $size
min_uses = 1
[backend cache-1]
url = http://127.0.0.1:$CP
EOF
	"$RP" -c "$TMP/rp-$mode.ini" >"$TMP/rp-$mode.log" 2>&1 &
	PIDS+=($!)
	eval "PID_rp_$mode=$!"
done
{
	bench_haproxy_head
	cat <<EOF
frontend fe
	bind 127.0.0.1:$HAP ssl crt $TMP/both.pem alpn http/1.1
	default_backend be
backend be
	server c1 127.0.0.1:$CP
EOF
} >"$TMP/haproxy.cfg"
haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
PIDS+=($!)
PID_haproxy=$!
mkdir -p "$TMP/nginx"
{
	bench_nginx_head
	cat <<EOF
	upstream up { server 127.0.0.1:$CP; keepalive 64; }
	server {
		listen 127.0.0.1:$NGP ssl;
		ssl_certificate $TMP/crt.pem;
		ssl_certificate_key $TMP/key.pem;
		ssl_protocols TLSv1.2 TLSv1.3;
		location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
	}
}
EOF
} >"$TMP/nginx.conf"
nginx -p "$TMP/nginx" -e "$TMP/nginx/error.log" -c "$TMP/nginx.conf" >"$TMP/nginx.log" 2>&1 &
PIDS+=($!)
PID_nginx=$!

wait_tls() {
	local i
	for i in $(seq 100); do
		curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$1/t/0.jpg" && return 0
		sleep 0.1
	done
	echo "nothing answers HTTPS on 127.0.0.1:$1 (logs in $TMP)" >&2
	exit 1
}
for p in $RPP $RPH $HAP $NGP; do wait_tls "$p"; done

# nginx's master does no work: its one worker is the child
nginx_pid() { pgrep -P "$PID_nginx" | head -1; }

# keepalive NAME PORT PID: "cpu_us_per_request p99_ms requests"
keepalive() {
	local out c0 c1 n
	curl -sk -o /dev/null "https://127.0.0.1:$2/t/1.jpg"       # a hit's fill
	c0=$(bench_cpu_ns "$3")
	out=$(timeout $((DURATION + 30)) wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "https://127.0.0.1:$2/t/1.jpg")
	c1=$(bench_cpu_ns "$3")
	n=$(awk '/requests in/ { print $1 }' <<<"$out")
	awk -v c="$((c1 - c0))" -v n="$n" -v p99="$(awk '$1 == "99%" { print $2 }' <<<"$out")" 'BEGIN {
		v = p99; u = 1
		if (v ~ /us$/) u = 0.001; else if (v ~ /ms$/) u = 1; else if (v ~ /s$/) u = 1000
		sub(/[a-z]+$/, "", v)
		printf "%.2f %.2f %d\n", c / n / 1000, v * u, n }'
}

# handshakes NAME PORT PID MODE(-new|-reuse): handshakes per CPU second
handshakes() {
	local out c0 c1 n
	c0=$(bench_cpu_ns "$3")
	# TLS 1.2: s_time ends each connection before a TLS 1.3 ticket (sent
	# after the handshake) is read, so -reuse would resume nothing there
	out=$(timeout $((DURATION + 30)) openssl s_time -connect "127.0.0.1:$2" "$4" -tls1_2 -time "$DURATION" 2>&1)
	c1=$(bench_cpu_ns "$3")
	n=$(awk '/connections in .* real seconds/ { print $1 }' <<<"$out" | tail -1)
	awk -v c="$((c1 - c0))" -v n="${n:-0}" 'BEGIN { printf "%.0f %d\n", c ? n / (c / 1e9) : 0, n }'
}

# idle PORT PID: bytes per idle TLS connection (IDLE of them, one request each)
idle() {
	timeout 120 python3 - "$1" "$2" "$IDLE" <<'PY'
import socket, ssl, sys, time
port, pid, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def rss():
    # the proxy's and, for nginx, its worker's
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) * 1024
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
time.sleep(0.5)
before = rss()
conns = []
for i in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    s.sendall(b"GET /t/1.jpg HTTP/1.1\r\nHost: localhost\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 4096:
        got += s.recv(65536)
    conns.append(s)
time.sleep(1.0)    # sweeps of parked memory (ringproxy: 50-100 ms)
print((rss() - before) // n)
PY
}

printf '| server | CPU us / HTTPS request | p99 ms | full handshakes / CPU s | resumed / CPU s | bytes / idle TLS conn |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
for who in rp_fwd rp_hit haproxy nginx; do
	case $who in
	rp_fwd) port=$RPP pid=$PID_rp_fwd label="ringproxy (forward)" ;;
	rp_hit) port=$RPH pid=$PID_rp_hit label="ringproxy (cache hit)" ;;
	haproxy) port=$HAP pid=$PID_haproxy label="HAProxy $(haproxy -v | awk 'NR==1 {print $3}')" ;;
	nginx) port=$NGP pid=$(nginx_pid) label="NGINX $(nginx -v 2>&1 | sed 's/.*nginx\///')" ;;
	esac
	bench_quiet
	read -r cpu p99 _ <<<"$(keepalive "$who" "$port" "$pid")"
	read -r full _ <<<"$(handshakes "$who" "$port" "$pid" -new)"
	read -r reused _ <<<"$(handshakes "$who" "$port" "$pid" -reuse)"
	mem=$(idle "$port" "$pid")
	printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$cpu" "$p99" "$full" "$reused" "$mem"
done
