#!/bin/bash
# tests/demo.sh -- the README's "run" command. On a fresh Debian 12 machine:
# installs what is missing, builds (debugoptimized, in build/; the README's
# release build is build-release/), starts three test caches on
# 127.0.0.1:9001-9003 and ringproxy on 127.0.0.1:8080 (stats on :8081) with conf/demo.ini,
# prints a few curl commands to try, and stops everything on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tests/deps.sh build
# build/ may hold only what is not a build (.ci/run puts the public cache
# suite's package in build/cachetests): configured is build.ninja there
echo "building ringproxy and the demo caches in build/ (about a minute the first time)"
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
echo "built"

# HTTPS: a self-signed certificate for localhost (made once), served on
# 127.0.0.1:8443 through the [tls] section conf/demo.ini includes
mkdir -p build/demo-tls
[ -f build/demo-tls/localhost.pem ] || {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
		-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
		-keyout build/demo-tls/localhost.key -out build/demo-tls/localhost.crt 2>/dev/null
	cat build/demo-tls/localhost.crt build/demo-tls/localhost.key >build/demo-tls/localhost.pem
}
printf '[tls]\nlisten = 127.0.0.1:8443\ncerts = %s/build/demo-tls/localhost.pem\n' "$PWD" >conf/demo.d/tls.ini

pids=()
stop() {
	trap - INT TERM EXIT
	echo
	echo "stopping ringproxy and the demo caches"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap stop INT TERM EXIT

for i in 1 2 3; do
	./build/tests/testcache/testcache --listen "127.0.0.1:900$i" --name "cache-$i" >/dev/null &
	pids+=($!)
done
./build/src/ringproxy -t -c conf/demo.ini
# in a session of its own: the terminal's Ctrl-C reaches this script only,
# and stop() sends ringproxy one SIGTERM (a second signal means "stop now")
setsid ./build/src/ringproxy -c conf/demo.ini &
pids+=($!)
sleep 0.5

cat <<'TXT'

ringproxy is listening on http://127.0.0.1:8080 and https://localhost:8443 in front of three demo caches.
Try:
  curl -si http://127.0.0.1:8080/thumbs/42_200x200.jpg | sed '/^\r$/q'   # the whole head, ringproxy's lines too
  curl -ksi https://localhost:8443/thumbs/42_200x200.jpg | sed '/^\r$/q'  # over TLS (self-signed: -k); X-Forwarded-Proto: https went to the cache
  open http://127.0.0.1:8081/ in a browser (stats page), or curl http://127.0.0.1:8081/stats
  for i in $(seq 1 9); do curl -s -o /dev/null -D - http://127.0.0.1:8080/thumbs/$i.jpg | grep -i x-ringproxy-backend; done
  ./build/src/ringproxy plan conf/demo.ini conf/demo-grow.ini   # what adding cache-4 would move
Ctrl-C stops everything.
TXT
wait
