#!/usr/bin/env python3
"""test_latency.py -- the counters and histograms of the request path:
per backend responses by class, bytes in and out, response time and time
to first byte; the proxy's own replies by status; the whole request as the
client saw it. /stats (p50/p90/p99), /metrics (Prometheus histograms,
promtool-checked) and the page's latency column agree with a load whose
timings are known (the test cache's delay knob).
usage: test_latency.py RINGPROXY TESTCACHE"""

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
PROMTOOL = shutil.which("promtool")


def admin(port, path):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    cache = harness.Cache(TC, "slow")
    conf = harness.conf_text([cache], proxy={"admin_listen": "127.0.0.1:0", "retries": 0},
                             ring={"balance_factor": 0})
    proxy = harness.Proxy(RP, conf)
    aport = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))

    conn = proxy.http()
    body_bytes = 0
    for i in range(20):             # 20 responses of about 40 ms
        st, _, body = harness.get_on(conn, f"/d/{i}.jpg?delay=40&size=1000")
        body_bytes += len(body)
        assert st == 200
    for i in range(5):
        st, _, _ = harness.get_on(conn, f"/n/{i}.jpg?status=404")
        assert st == 404
    for i in range(3):
        st, _, _ = harness.get_on(conn, f"/r/{i}.jpg?status=302")
        assert st == 302
    conn.close()
    # a request the proxy refuses: 400
    bad, rd = harness.raw(proxy.port, b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    rd.closed()
    t.check(bad[0].status == 400, "a request with two Host lines gets 400", str(bad[0].status))

    doc = json.loads(admin(aport, "/stats"))
    b = doc["backends"][0]
    t.check((b["responses_2xx"], b["responses_3xx"], b["responses_4xx"], b["responses_5xx"]) == (20, 3, 5, 0),
            "responses by class: 20 2xx, 3 3xx, 5 4xx, 0 5xx",
            str([b[k] for k in ("responses_2xx", "responses_3xx", "responses_4xx", "responses_5xx")]))
    t.check(b["bytes_in"] > body_bytes and b["bytes_out"] > 28 * 30,
            "bytes in (at least the bodies) and out (the request heads) counted",
            f"in {b['bytes_in']} (bodies {body_bytes}) out {b['bytes_out']}")
    lat = b["latency"]["response"]
    t.check(lat["count"] == 28 and 0.025 <= lat["p50"] <= 0.1 and lat["p50"] <= lat["p90"] <= lat["p99"],
            "response time: 28 counted, p50 around the 40 ms delay", str(lat))
    ttfb = b["latency"]["ttfb"]
    t.check(ttfb["count"] == 28 and 0.025 <= ttfb["p50"] <= 0.1, "time to first byte: 28 counted", str(ttfb))
    req = doc["latency"]["request"]
    t.check(req["count"] == 29 and 0.025 <= req["p50"] <= 0.1 and req["sum"] >= 20 * 0.039,
            "the whole request as the client saw it: 29 (the 400 too), 20 of them 40 ms or more", str(req))
    t.check(doc["replies_400"] == 1 and doc["replies_502"] == 0 and doc["reply_bytes"] > 0,
            "the proxy's own 400 counted, with its bytes", f"{doc['replies_400']} {doc['reply_bytes']}")

    metrics = admin(aport, "/metrics")
    t.check('ringproxy_backend_response_seconds_bucket{backend="slow",le="+Inf"} 28' in metrics and
            'ringproxy_backend_response_seconds_bucket{backend="slow",le="0.01"} 8' in metrics and
            'ringproxy_backend_response_seconds_count{backend="slow"} 28' in metrics and
            'ringproxy_backend_ttfb_seconds_count{backend="slow"} 28' in metrics and
            'ringproxy_request_seconds_count 29' in metrics and
            'ringproxy_backend_responses_4xx_total{backend="slow"} 5' in metrics and
            'ringproxy_replies_400_total 1' in metrics,
            "/metrics: histograms (buckets cumulative: the 8 quick ones under 10 ms, all 28 under +Inf) "
            "and the counters by class and status")
    page = admin(aport, "/")
    t.check("Response time" in page and 'class="latency">' in page and "none yet" not in page,
            "the page shows a response time column with a median")
    if not PROMTOOL:
        t.skip("promtool check metrics", "no promtool")
    else:
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True, text=True,
                           timeout=60)
        t.check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
                "/metrics with histograms passes promtool check metrics", p.stdout + p.stderr)
    proxy.stop()

    # a dead backend: the proxy's own 502, counted
    conf = harness.conf_text([("dead", dead_port())], proxy={"admin_listen": "127.0.0.1:0", "retries": 0})
    proxy = harness.Proxy(RP, conf, tag="dead")
    aport = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    st, _, _ = harness.get(proxy.port, "/a.jpg")
    doc = json.loads(admin(aport, "/stats"))
    t.check(st == 502 and doc["replies_502"] == 1 and doc["backends"][0]["latency"]["response"]["count"] == 0,
            "a connect failure: the proxy's own 502 counted, no backend response time", str(st))
    proxy.stop()


harness.run_main(t, main)
