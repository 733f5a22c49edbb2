#!/bin/bash
# tests/bench/h2.sh -- HTTP/2 clients (h2load -c 10 -m 100: ten connections,
# a hundred streams each) through ringproxy, HAProxy and NGINX side by side,
# cleartext with prior knowledge (h2c) and over TLS (ALPN h2; the same
# ECDSA P-256 certificate for all three: ringproxy's [tls], HAProxy's
# "bind ... ssl crt ... alpn h2,http/1.1", NGINX's "listen ... ssl http2"),
# 4 KiB thumbnails from one test cache: per proxy, scheme and mode, CPU
# per request (the proxy's processes, all threads), requests per second,
# p99 latency (from h2load's per-request log), and the memory one more h2
# connection holds, idle after 100 streams (the RSS growth over a second
# CONNS such connections, the first CONNS open, over CONNS, on a fresh
# process before the load; see conn_memory).
#
# Modes: forward (every request goes to the backend: ringproxy's [cache]
# off, the others without a cache) and hit (100 URLs, cached: ringproxy's
# hot-object cache, NGINX's proxy_cache, HAProxy's cache).
#
# The scheme h1tls is the same load over HTTPS/1.1 on the same listener
# (h2load --h1 -c H1CONNS, one request at a time on each connection,
# keep-alive): HTTP/2's CPU per request beside HTTP/1.1's in one run. With
# H1CONNS 16 (the default) it is tls.sh's load (wrk -c16); with 1000 it
# has as many requests in flight as the h2 runs, at the cost of 1000 full
# handshakes in each round (h2load opens its connections anew): N/H1CONNS
# requests share each one's CPU. No memory column (an HTTP/2 client's).
#
# Usage (from the source tree): bash tests/bench/h2.sh
# Environment: N [100000] requests a run, ROUNDS [3] (the median is
# printed), WORKERS [1] threads/processes each proxy runs, CONNS [200],
# PROXIES ["ringproxy haproxy nginx"], MODES ["forward hit"], SCHEMES
# ["h2c tls"; also h1tls], H1CONNS [16].
# Every load is bounded (h2load -n, timeout); every process started is
# stopped by PID (lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init h2
command -v h2load >/dev/null || { echo "h2load missing (nghttp2-client)" >&2; exit 1; }

N=${N:-100000}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-1}
CONNS=${CONNS:-200}
PROXIES=${PROXIES:-ringproxy haproxy nginx}
MODES=${MODES:-forward hit}
SCHEMES=${SCHEMES:-h2c tls}
H1CONNS=${H1CONNS:-16}

bench_caches 0 0 --size 4096
BE=${PORTS[0]}
for i in $(seq 0 99); do echo "/thumbs/$i/1_200x200.jpg"; done >"$TMP/urls-hit"
for i in $(seq 0 9999); do echo "/fwd/$i/1_200x200.jpg"; done >"$TMP/urls-forward"
mkdir -p "$TMP/nginx/cache" "$TMP/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/tls/k.key" \
	-out "$TMP/tls/c.crt" -days 30 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null
cat "$TMP/tls/c.crt" "$TMP/tls/k.key" >"$TMP/tls/10-bench.pem"


# conn_memory SCHEME: bytes one more h2 connection holds once 100 streams
# are done on it and it is idle: "NEXT FIRST", the RSS growth over a second
# batch of CONNS such connections, the first batch still open, and over the
# first. The first also pays what a server sets up once however many come
# (pools and free lists filling; RSS may even fall as the warm-up's memory
# is trimmed), so the second is the figure (as tls.sh's idle bytes).
conn_memory() {
	local r0 r1 r2
	rm -f "$TMP/ready1" "$TMP/ready2" "$TMP/go"
	sleep 1
	r0=$(bench_rss_kib "${PP[@]}")
	/usr/bin/python3 - "$PORT" "$CONNS" "$TMP" "$1" <<'EOF' &
import os, resource, socket, ssl, sys, time
sys.path.append("/usr/lib/python3/dist-packages")
import hpack, hyperframe.frame as hf
port, n, tmp, scheme = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < 2 * n + 100:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(2 * n + 100, hard), hard))
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])
conns = []
def batch():
    for c in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        if scheme == "tls":
            s = ctx.wrap_socket(s, server_hostname="localhost")
        e = hpack.Encoder()
        out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + hf.SettingsFrame(0).serialize()
        out += hf.WindowUpdateFrame(0, window_increment=2**30).serialize()
        for i in range(100):
            f = hf.HeadersFrame(1 + 2 * i, data=e.encode([(":method", "GET"), (":scheme", "http"),
                (":authority", "b"), (":path", f"/thumbs/{i}/1_200x200.jpg")]))
            f.flags.add("END_HEADERS"); f.flags.add("END_STREAM")
            out += f.serialize()
        s.sendall(out)
        buf, ended = b"", 0
        while ended < 100:
            d = s.recv(1 << 20)
            if not d:
                break
            buf += d
            while len(buf) >= 9:
                f, ln = hf.Frame.parse_frame_header(memoryview(buf[:9]))
                if len(buf) < 9 + ln:
                    break
                if "END_STREAM" in f.flags and f.type in (0, 1):
                    ended += 1
                buf = buf[9 + ln:]
        conns.append(s)
batch()
open(os.path.join(tmp, "ready1"), "w").close()
end = time.monotonic() + 60
while not os.path.exists(os.path.join(tmp, "go")) and time.monotonic() < end:
    time.sleep(0.05)
batch()
open(os.path.join(tmp, "ready2"), "w").close()
time.sleep(5)
EOF
	local py=$!
	for _ in $(seq 600); do [ -e "$TMP/ready1" ] && break; sleep 0.1; done
	sleep 1     # the idle connections' memory swept back (ringproxy: 50-100 ms)
	r1=$(bench_rss_kib "${PP[@]}")
	touch "$TMP/go"
	for _ in $(seq 600); do [ -e "$TMP/ready2" ] && break; sleep 0.1; done
	sleep 1
	r2=$(bench_rss_kib "${PP[@]}")
	wait "$py" 2>/dev/null || true
	echo "$(((r2 - r1) * 1024 / CONNS)) $(((r1 - r0) * 1024 / CONNS))"
}

printf 'proxy\tmode\tround\treq_per_s\tcpu_us_per_req\tp99_ms\tbytes_per_conn\tfirst\n' >"$TMP/results.tsv"
for scheme in $SCHEMES; do
for mode in $MODES; do
	for name in $PROXIES; do
		load=(-c 10 -m 100)
		if [ "$scheme" = h1tls ]; then
			load=(--h1 -c "$H1CONNS" -m 1)
			bench_h2_proxy "$name" "$mode" tls
			mem="- -"
		else
			bench_h2_proxy "$name" "$mode" "$scheme"
			# memory first, on a fresh process: after the load runs, the
			# heap holds the freed memory of 1000 streams in flight, and
			# new idle connections fit in it unseen (every proxy then
			# shows ~0)
			mem=$(conn_memory "$scheme")
		fi
		# h2load -i takes scheme, host and port from the first line only
		sed "1s|^|$URL|" "$TMP/urls-$mode" >"$TMP/urls-run"
		# warm: the cache filled, connections pooled
		timeout 120 h2load "${load[@]}" -n 20000 -i "$TMP/urls-run" >/dev/null
		for r in $(seq "$ROUNDS"); do
			bench_quiet
			ns0=$(bench_cpu_ns "${PP[@]}")
			timeout 300 h2load "${load[@]}" -n "$N" -i "$TMP/urls-run" --log-file="$TMP/h2load.log" \
				>"$TMP/h2load.out"
			ns1=$(bench_cpu_ns "${PP[@]}")
			ok=$(sed -n 's/.* \([0-9]*\) succeeded.*/\1/p' "$TMP/h2load.out")
			rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$TMP/h2load.out")
			p99=$(awk '{ print $3 }' "$TMP/h2load.log" | sort -n |
			      awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.2f", v[i] / 1000 }')
			[ "$ok" = "$N" ] || echo "# $name $scheme $mode: $ok of $N succeeded" >&2
			[ "$r" = 1 ] || mem="- -"
			printf '%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\n' "$name" "$scheme-$mode" "$r" "$rps" \
			       "$(echo "($ns1 - $ns0) / 1000 / $N" | bc -l)" "$p99" ${mem% *} ${mem#* } >>"$TMP/results.tsv"
		done
		bench_stop "${PP[@]}"
	done
done
done
echo "# commit $(git -C "$ROOT" rev-parse --short HEAD), N=$N ROUNDS=$ROUNDS WORKERS=$WORKERS CONNS=$CONNS H1CONNS=$H1CONNS"
printf 'proxy\tmode\treq/s\tCPU us/req\tp99 ms\tbytes/idle h2 conn, 100 streams done (next %s)\t(first %s)\n' "$CONNS" "$CONNS"
for mode in $(for s in $SCHEMES; do for m in $MODES; do echo "$s-$m"; done; done); do
	for name in $PROXIES; do
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$mode" \
		       "$(awk -F'\t' -v p="$name" -v m="$mode" '$1 == p && $2 == m { print $4 }' "$TMP/results.tsv" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')" \
		       "$(awk -F'\t' -v p="$name" -v m="$mode" '$1 == p && $2 == m { print $5 }' "$TMP/results.tsv" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')" \
		       "$(awk -F'\t' -v p="$name" -v m="$mode" '$1 == p && $2 == m { print $6 }' "$TMP/results.tsv" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')" \
		       "$(awk -F'\t' -v p="$name" -v m="$mode" '$1 == p && $2 == m && $7 != "-" { print $7 }' "$TMP/results.tsv")" \
		       "$(awk -F'\t' -v p="$name" -v m="$mode" '$1 == p && $2 == m && $8 != "-" { print $8 }' "$TMP/results.tsv")"
	done
done
