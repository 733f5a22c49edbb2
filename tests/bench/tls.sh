#!/bin/bash
# tests/bench/tls.sh -- HTTPS on the client side, ringproxy beside HAProxy
# and NGINX (Debian's), each with one worker and the same ECDSA P-256
# certificate, in front of one testcache (4 KiB bodies):
#   1. keep-alive HTTPS (wrk over TLS, one URL): CPU per request and p99,
#      each forwarding to the cache; ringproxy also answering from its cache
#      (a hit);
#   2. full TLS 1.2 handshakes and 3. resumed ones: handshakes per second
#      of the server's CPU, from a client that closes as browsers do (a
#      FIN after its handshake), and from openssl s_time -new / -reuse
#      (which resets each connection: see closed() below);
#   4. memory per idle TLS connection: the RSS growth over IDLE more
#      connections (1000 by default) that each made a request and went
#      idle, with IDLE such connections open already (every server keeps
#      free lists and pools of a fixed size, filled by the first ones);
#      the first IDLE's growth is shown beside it.
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

# closed PORT PID MODE(new|resume): handshakes per CPU second, "RATE N", by
# a client that ends each connection as browsers do, with a FIN once its
# handshake is done (TLS 1.2 again; resume: the first connection's session
# each time, and every one must resume). s_time instead ends each with a
# reset, which discards bytes the server has not read yet: a server that
# reads the client's last flight a little later never verifies its Finished
# (one TLS PRF less, counted by allocation stacks: 2.03 a resumed handshake
# for HAProxy 2.6 against 3 for ringproxy, which reads it at once), so
# s_time's resumed figure flatters a slower reader. Both are shown.
closed() {
	local c0 c1 out
	c0=$(bench_cpu_ns "$2")
	out=$(timeout $((DURATION + 30)) python3 - "$1" "$DURATION" "$3" <<'PY'
import socket, ssl, sys, time
port, secs, mode = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
ctx.maximum_version = ssl.TLSVersion.TLSv1_2
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
sess = s.session if mode == "resume" else None
s.close()
n = 0
t0 = time.monotonic()
while time.monotonic() - t0 < secs:
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost", session=sess)
    if sess is not None and not s.session_reused:
        sys.exit("a handshake was not resumed")
    n += 1
    s.close()
print(n)
PY
) || out=0
	c1=$(bench_cpu_ns "$2")
	awk -v c="$((c1 - c0))" -v n="${out:-0}" 'BEGIN { printf "%.0f %d\n", c ? n / (c / 1e9) : 0, n }'
}

# idle PORT PID: bytes per idle TLS connection: "NEXT FIRST", RSS growth over
# a second batch of IDLE connections (one request each, then idle) and over
# the first. The first batch also pays what a server sets up once however
# many connections come (its free lists and pools filling, a thread's
# first handshake, the allocator's arenas growing); the second, with the
# first still open, pays only what one more connection costs.
idle() {
	timeout 240 python3 - "$1" "$2" "$IDLE" <<'PY'
import resource, socket, ssl, sys, time
port, pid, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < 2 * n + 100:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(2 * n + 100, hard), hard))
def rss():
    # the proxy's and, for nginx, its worker's
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) * 1024
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
conns = []
def batch():
    for i in range(n):
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
        s.sendall(b"GET /t/1.jpg HTTP/1.1\r\nHost: localhost\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 4096:
            got += s.recv(65536)
        conns.append(s)
    time.sleep(1.0)    # sweeps of parked memory (ringproxy: 50-100 ms)
time.sleep(0.5)
r0 = rss()
batch()
r1 = rss()
batch()
print((rss() - r1) // n, (r1 - r0) // n)
PY
}

printf '| server | CPU us / HTTPS request | p99 ms | full handshakes / CPU s | resumed / CPU s | full, s_time | resumed, s_time | bytes / idle TLS conn (next %d) | (first %d) |\n' "$IDLE" "$IDLE"
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for who in rp_fwd rp_hit haproxy nginx; do
	case $who in
	rp_fwd) port=$RPP pid=$PID_rp_fwd label="ringproxy (forward)" ;;
	rp_hit) port=$RPH pid=$PID_rp_hit label="ringproxy (cache hit)" ;;
	haproxy) port=$HAP pid=$PID_haproxy label="HAProxy $(haproxy -v | awk 'NR==1 {print $3}')" ;;
	nginx) port=$NGP pid=$(nginx_pid) label="NGINX $(nginx -v 2>&1 | sed 's/.*nginx\///')" ;;
	esac
	bench_quiet
	read -r cpu p99 _ <<<"$(keepalive "$who" "$port" "$pid")"
	read -r full _ <<<"$(closed "$port" "$pid" new)"
	read -r reused _ <<<"$(closed "$port" "$pid" resume)"
	read -r sfull _ <<<"$(handshakes "$who" "$port" "$pid" -new)"
	read -r sreused _ <<<"$(handshakes "$who" "$port" "$pid" -reuse)"
	read -r mem first <<<"$(idle "$port" "$pid")"
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$cpu" "$p99" "$full" "$reused" "$sfull" "$sreused" "$mem" "$first"
done
