#!/bin/bash
# tests/run.sh -- the whole test suite from a fresh Debian 12 machine:
# installs what is missing, builds with ASan+UBSan (gcc) and runs every
# suite; then with clang builds with ThreadSanitizer and runs the unit
# suite and the end-to-end tests where threads meet again, and builds the
# libFuzzer targets and runs each for a bounded time; then the public HTTP
# cache test suite against a release build (tests/cachetests/run.sh, its
# known failures in tests/cachetests/expected.txt); last, a 60 s soak of
# the release build under load, reloads and cache kills
# (tests/bench/soak.sh). Ends with one line
# "tests: N passed, N failed, N skipped, N flaky" (the cache suite and
# the soak count as one test each; a flaky one is an e2e test that failed
# and then passed alone, and is named with its output above that line).
# Exit status: 0 only if everything passed.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tests/deps.sh test

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# suite DIR LOGBASE [ARGS...]: one meson test run; an end-to-end test
# that fails is run once more on its own (LOGBASE-retry), because on a shared 2-core
# machine a timing-bound end-to-end test can lose a race with the machine
# rather than with the code. The summary below names every such test
# "FLAKY" with its first output; a test that fails twice fails the run.
suite() {
	local dir=$1 base=$2
	shift 2
	rm -f "$dir/meson-logs/$base-retry.json"
	meson test -C "$dir" --print-errorlogs --logbase "$base" "$@" && return 0
	local names
	mapfile -t names < <(python3 - "$dir/meson-logs/$base.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("result") not in ("OK", "EXPECTEDFAIL", "SKIP"):
        print(t["name"].split(" / ", 1)[-1] if ":e2e / " in t["name"] else "")
PY
)
	# only end-to-end tests get a second run: a unit test, a sanitizer's
	# report in one and a fuzzer's crash are the code's
	for n in "${names[@]}"; do [ -n "$n" ] || return 1; done
	[ "${#names[@]}" -gt 0 ] || return 1
	echo "### running again on their own: ${names[*]}"
	meson test -C "$dir" --print-errorlogs --num-processes 1 \
		--logbase "$base-retry" "${names[@]}"
}

rc=0
if [ ! -d build-asan ]; then
	meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
		-Dfuzz=disabled -Dman=enabled >/dev/null
else
	# a build dir made before the man pages were an option
	meson configure build-asan -Dman=enabled >/dev/null
fi
ninja -C build-asan
suite build-asan testlog --num-processes 2 || rc=1
logs=(build-asan/meson-logs/testlog.json)

# The public HTTP cache test suite (npm http-cache-tests, installed by the
# script itself with node and npm from tests/deps.sh) against the release
# build the soak uses: about 20 s, bounded by its own timeouts and this
# one; its table goes to build-rel/cachetests.md. Any required or setup
# failure not in tests/cachetests/expected.txt fails it, and so does one
# listed there that passes now.
cachetests=FAIL
# (-Dtests=enabled: the soak below runs its test caches from it)
[ -f build-rel/build.ninja ] || meson setup build-rel -Dbuildtype=release -Dfuzz=disabled -Dtests=enabled >/dev/null
meson configure build-rel -Dtests=enabled >/dev/null 2>&1 ||
	meson setup --reconfigure build-rel -Dtests=enabled >/dev/null
ninja -C build-rel src/ringproxy >/dev/null
out=$(mktemp)
# A run with a difference runs once more (about 20 s), as an e2e test
# does: the suite's tests wait on the clock (pause_after, one-second
# lifetimes against whole-second Dates), which a loaded machine can
# stretch; the first run's differences stay in the log, marked.
for try in 1 2; do
	if timeout --kill-after=10 1200 bash tests/cachetests/run.sh build-rel/src/ringproxy \
		--expect tests/cachetests/expected.txt --json build-rel/cachetests.json >"$out" 2>&1; then
		cachetests=OK
		break
	fi
	if [ "$try" = 1 ]; then
		echo "### the public cache suite: a difference; running it again (FLAKY if it then passes)"
		sed -n '/^Against /,$p' "$out"
	fi
done
mkdir -p build-rel && mv "$out" build-rel/cachetests.md
cat build-rel/cachetests.md
[ "$cachetests" = OK ] || rc=1

if command -v clang >/dev/null; then
	# ThreadSanitizer over the workers, the main thread and the shared
	# cache: every unit test (the threaded ones: cache, sketch, balance)
	# and the end-to-end tests where threads meet, against the proxy built
	# with it: the data path, coalescing across 2 and 4 workers (their
	# mailboxes), stale serving and background refreshes, purges, reloads
	# and stops, health flaps, stats, rates and histograms read by the
	# admin listener, the access log's reopen, the hostile peers.
	# TSAN_E2E=all runs every e2e test (about 100 s more on 2 cores: those
	# left out run no thread the list does not). A report fails a unit
	# test (exit 66) and an e2e test (the harness reads the proxy's
	# stderr). No suppressions. testcache is built plain there
	# (tests/testcache/meson.build says why).
	# The two clang builds go without the default link-time
	# optimization: they look for races and inputs, and the plain and
	# sanitized gcc builds above run the code as it ships.
	if [ ! -d build-tsan ]; then
		CC=clang meson setup build-tsan -Db_sanitize=thread -Db_lundef=false -Db_lto=false \
			-Dfuzz=disabled >/dev/null
	fi
	ninja -C build-tsan
	tsan_e2e=(routing http bodies failures balance health reload reload_stop admin
		  metrics latency access_log cache cache_w4 stale cache_fill purge hostile ramp where
		  backend_reach cache_memo limits discovery tls h2 h2tls)
	[ "${TSAN_E2E:-}" = all ] && tsan_e2e=(--suite e2e)
	suite build-tsan tsan-unit --num-processes 2 --suite unit || rc=1
	suite build-tsan tsan-e2e --num-processes 2 "${tsan_e2e[@]}" || rc=1
	logs+=(build-tsan/meson-logs/tsan-unit.json build-tsan/meson-logs/tsan-e2e.json)

	if [ ! -d build-fuzz ]; then
		CC=clang meson setup build-fuzz -Dfuzz=enabled -Db_lto=false >/dev/null
	fi
	ninja -C build-fuzz
	meson test -C build-fuzz --suite fuzz --print-errorlogs || rc=1
	logs+=(build-fuzz/meson-logs/testlog.json)
fi

# The soak: a release build (memory and fds judged without a sanitizer's
# allocator), 60 s of load with a reload every 5 s and a cache killed every
# 20 s; its table goes to build-rel/soak.md. Its goals hold on a loaded
# machine: failures are counted, not timed, and RSS and fds are compared
# with themselves.
soak=FAIL
out=$(mktemp)
if bash tests/bench/soak.sh "${SOAK_SECONDS:-60}" >"$out" 2>&1; then
	soak=OK
fi
mkdir -p build-rel && mv "$out" build-rel/soak.md
cat build-rel/soak.md
[ "$soak" = OK ] || rc=1

# one summary line over every meson test run above, the cache suite and
# the soak
SOAK="$soak" CACHETESTS="$cachetests" python3 - "${logs[@]}" <<'PY'
import json, os, sys
ok = bad = skip = 0
failed, flaky = [], []
for name in ("CACHETESTS", "SOAK"):
    if os.environ.get(name):
        if os.environ[name] == "OK":
            ok += 1
        else:
            bad += 1
            print(f"FAILED {name.lower()} (see build-rel/{'cachetests' if name == 'CACHETESTS' else 'soak'}.md)")
for path in sys.argv[1:]:
    retry = {}
    rpath = path[:-len(".json")] + "-retry.json"
    if os.path.exists(rpath):
        for line in open(rpath):
            t = json.loads(line)
            retry[t["name"]] = t.get("result", "")
    for line in open(path):
        t = json.loads(line)
        r = t.get("result", "")
        if r in ("OK", "EXPECTEDFAIL"):
            ok += 1
        elif r == "SKIP":
            skip += 1
        elif retry.get(t["name"]) in ("OK", "EXPECTEDFAIL"):
            ok += 1
            flaky.append((path, t))
        else:
            bad += 1
            failed.append((path, t))
# a failure's name and the end of its output again here, because a long
# run's log is often read from its end
for word, rows in (("FLAKY (failed, then passed alone)", flaky), ("FAILED", failed)):
    for path, t in rows:
        print(f"{word} {t.get('name')} ({t.get('result')}) in {path}:")
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        for l in out.splitlines()[-40:]:
            print(f"    {l}")
print(f"tests: {ok} passed, {bad} failed, {skip} skipped, {len(flaky)} flaky")
PY
exit $rc
