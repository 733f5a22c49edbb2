#!/usr/bin/env python3
"""test_metrics.py -- what /stats and /metrics say beyond the totals: the
build (version, library versions), the config file's path, SHA-256 and
load time (changing with a reload), per-second rates over 10 s and 5 min
against a load of known speed, one spelling of up, and /metrics passing
`promtool check metrics` (Debian package prometheus).
usage: test_metrics.py RINGPROXY TESTCACHE"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
PROMTOOL = shutil.which("promtool")


def get(port, path):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def paced(proxy, per_second, seconds):
    """GET at per_second requests a second for seconds; how many went."""
    conn = proxy.http()
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        due = start + n / per_second
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        conn.request("GET", f"/r/{n % 50}.jpg")
        conn.getresponse().read()
        n += 1
    conn.close()
    return n


def main():
    caches = [harness.Cache(TC, n) for n in ("cache-1", "cache-2")]
    path = harness.write("metrics.ini", harness.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0"}))
    started = time.monotonic()
    proxy = harness.Proxy(RP, path=path)
    port = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    doc = json.loads(get(port, "/stats"))
    b = doc["build"]
    version = subprocess.run([RP, "--version"], capture_output=True, text=True).stdout.split()[1]
    t.check(b["version"] == version and b["libevent"].startswith("2.1") and b["openssl"].startswith("3.") and
            b["libcurl"][0].isdigit() and b["inih"], "/stats build: version and library versions", str(b))
    c = doc["config"]
    t.check(c["path"] == path and c["sha256"] == sha and abs(c["loaded"] - time.time()) < 30,
            "/stats config: its path, the SHA-256 of its bytes, when it was loaded", str(c))
    t.check(all(x["up"] is True for x in doc["backends"]) and
            all(x["up"] is True for x in json.loads(get(port, "/ring"))["backends"]),
            "up is spelled true in /stats as in /ring")

    # rates: about 40 requests a second for 12 s
    sent = paced(proxy, 40, 12)
    time.sleep(1.2)             # one more sample after the last request
    doc = json.loads(get(port, "/stats"))
    since = time.monotonic() - started
    r10, r5 = doc["rates"]["10s"]["requests"], doc["rates"]["5m"]["requests"]
    t.note(f"{sent} requests in 12 s; /stats says {r10:.1f}/s over 10 s, {r5:.1f}/s over 5 min")
    t.check(28 <= r10 <= 44, "requests per second over the last 10 s match the load (~40/s, last second idle)",
            f"{r10}")
    # under 5 min up: the window is every sample there is, since about
    # a second after the start
    t.check(0.75 * sent / since <= r5 <= 1.25 * sent / (since - 2),
            "over 5 min: the requests since the start over the time since", f"{r5} vs {sent} in {since:.1f} s")
    per = sum(x["rates"]["10s"]["requests"] for x in doc["backends"])
    t.check(abs(per - r10) < 0.5, "the backends' rates add up to the proxy's", f"{per} vs {r10}")
    time.sleep(11)
    doc = json.loads(get(port, "/stats"))
    t.check(doc["rates"]["10s"]["requests"] == 0 and doc["rates"]["5m"]["requests"] > 0,
            "10 s after the load: 0 over 10 s, still some over 5 min", str(doc["rates"]))

    # a reload: a new hash and load time
    time.sleep(1)
    harness.write("metrics.ini", harness.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0"},
                                                   ring={"balance_factor": 2}))
    line = proxy.reload()
    t.check(line and line.endswith("; settings: balance_factor 1.25 -> 2"),
            "a reload that changes no backend names the setting that changed", str(line))
    doc2 = json.loads(get(port, "/stats"))
    with open(path, "rb") as f:
        sha2 = hashlib.sha256(f.read()).hexdigest()
    t.check(doc2["config"]["sha256"] == sha2 != sha and doc2["config"]["loaded"] > c["loaded"],
            "after the reload: the new file's hash and a later load time", str(doc2["config"]))
    t.check(doc2["reloads"][0]["report"] == line and doc2["last_reload"]["report"] == line,
            "/stats lists the reload with its report")

    metrics = get(port, "/metrics")
    t.check(f'ringproxy_config_info{{path="{path}",sha256="{sha2}"}} 1' in metrics and
            f'ringproxy_build_info{{version="{version}",' in metrics and
            'ringproxy_backend_up{backend="cache-1"} 1' in metrics,
            "/metrics: build_info, config_info, up as 0/1")
    # a status in a label, not in the name; the old names one more release
    series = dict(re.findall(r"^(\S+) (\S+)$", metrics, re.M))
    ok2xx = [series.get(f'ringproxy_backend_http_responses_total{{backend="{c.name}",code="2xx"}}')
             for c in caches]
    old2xx = [series.get(f'ringproxy_backend_responses_2xx_total{{backend="{c.name}"}}') for c in caches]
    t.check(None not in ok2xx and ok2xx == old2xx and sum(int(v) for v in ok2xx) >= sent,
            "ringproxy_backend_http_responses_total{backend,code=\"2xx\"} counts the 2xx responses "
            "(as the old responses_2xx name does)", f"{ok2xx} {old2xx} sent {sent}")
    codes = sorted(re.findall(r'^ringproxy_replies_total\{code="([^"]+)"\} \d+$', metrics, re.M))
    t.check(codes == sorted(["400", "408", "431", "502", "503", "504", "other"]),
            "ringproxy_replies_total has one series per code label", str(codes))
    t.check(re.search(r'^# HELP ringproxy_replies_400_total .*deprecated.*ringproxy_replies_total\{code="400"\}$',
                      metrics, re.M) and
            re.search(r'^# HELP ringproxy_backend_responses_5xx_total .*deprecated.*'
                      r'ringproxy_backend_http_responses_total\{code="5xx"\}$', metrics, re.M),
            "the old names are still there, their HELP naming the series that replaces them")
    if not PROMTOOL:
        t.skip("promtool check metrics", "no promtool (bash tests/deps.sh test installs prometheus)")
    else:
        bad = "# HELP x_requests a\n# TYPE x_requests counter\nx_requests 1\n"
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=bad, capture_output=True, text=True, timeout=60)
        t.check(p.returncode != 0, "self-check: promtool refuses a counter without _total", p.stdout + p.stderr)
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True, text=True,
                           timeout=60)
        t.check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
                "/metrics passes promtool check metrics, without a lint warning", p.stdout + p.stderr)
    proxy.stop()


harness.run_main(t, main)
