#!/bin/bash
# tests/deps.sh -- install the Debian 12 packages ringproxy needs to build,
# test, demo and benchmark. Only what is missing is installed; safe to rerun.
# Usage: bash tests/deps.sh [build|test|bench|cachetests]   (default: build)
#   build: compile and run (the demo); test: + clang/libFuzzer and the tools
#   the tests use (scdoc, man and groff for the man pages, Varnish for the
#   test in front of real caches, promtool from prometheus checks /metrics,
#   headless chromium renders the admin page, wrk drives the soak, nginx,
#   haproxy and nutcracker place keys for the compatible schemes); bench:
#   + haproxy, nginx, wrk and Varnish (tests/bench/ramp.sh); cachetests:
#   + node and npm for the public HTTP cache test suite, unshare and ip for
#   its private network namespace (tests/cachetests/run.sh)
set -euo pipefail

want=(gcc libc6-dev meson ninja-build pkg-config libevent-dev libssl-dev openssl
      libinih-dev libcurl4-openssl-dev libc-ares-dev libxxhash-dev zlib1g-dev python3 curl procps
      libnghttp2-dev)
case "${1:-build}" in
build) ;;
test) want+=(clang libclang-rt-14-dev iproute2 util-linux
            scdoc man-db groff-base        # the man pages, built and rendered
            varnish                        # tests/e2e/test_varnish.py
            nginx-light haproxy nutcracker # test_compat, unit compat-ring-live
            prometheus chromium            # promtool for /metrics, the page
            unbound                        # test_discovery: the DNS
            python3-h2 nghttp2-client      # test_h2: frames, nghttp
            hitch openssl sslscan testssl.sh # test_tls: a terminator in front; test_tls_review
            wrk) ;;                        # tests/bench/soak.sh
bench) want+=(haproxy nginx-light wrk varnish nghttp2-client openssl
       python3-h2) ;;                 # h2.sh's idle connections, h2flood.py
cachetests) want+=(nodejs iproute2 util-linux)
	# a nodejs from elsewhere (NodeSource's) carries its own npm and conflicts
	# with Debian's npm package
	command -v npm >/dev/null || want+=(npm) ;;
*) echo "usage: bash tests/deps.sh [build|test|bench|cachetests]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
