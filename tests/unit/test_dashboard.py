#!/usr/bin/env python3
"""test_dashboard.py -- docker/grafana's dashboard asks for what ringproxy
emits: every PromQL expression of its panels and variables is parsed
(promtool check rules, Prometheus' own parser, where promtool is here;
the names are read by a tokenizer of our own either way), and each metric
name it uses is a family of a running ringproxy's /metrics (a histogram's
_bucket, _sum and _count included). A query that names a metric the proxy
does not write fails. The demo's Prometheus config passes promtool check
config, and its scrape target is the proxy's admin listener.
usage: test_dashboard.py RINGPROXY TESTCACHE"""

import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import livestats  # noqa: E402
from livestats import harness  # noqa: E402

RP, TC = sys.argv[1:3]
t = harness.Tap()
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOCKER = os.path.join(ROOT, "docker")
PROMTOOL = shutil.which("promtool")

# PromQL's functions and aggregations (Prometheus 2.x), its keywords, and
# the modifiers whose parenthesised lists hold label names, not metrics
FUNCS = set("""abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min
count_over_time day_of_month day_of_week day_of_year days_in_month delta deriv exp floor
histogram_quantile histogram_count histogram_sum histogram_fraction histogram_stddev histogram_stdvar
holt_winters hour idelta increase irate label_join label_replace last_over_time ln log10 log2
mad_over_time max_over_time min_over_time minute month predict_linear present_over_time
quantile_over_time rate resets round scalar sgn sort sort_desc sqrt stddev_over_time
stdvar_over_time sum_over_time time timestamp vector year acos acosh asin asinh atan atanh cos
cosh sin sinh tan tanh deg pi rad
sum min max avg group stddev stdvar count count_values bottomk topk quantile label_values""".split())
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def expressions(dash):
    """(where, expr) of every query of the dashboard: each panel's targets
    (rows' panels too) and each query variable."""
    out = []

    def panels(ps):
        for p in ps:
            for tg in p.get("targets", []):
                if tg.get("expr"):
                    out.append((f"panel {p.get('title')!r} {tg.get('refId')}", tg["expr"]))
            panels(p.get("panels", []))
    panels(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and q:
            out.append((f"variable {v['name']!r}", q))
    return out


def grafana_free(expr):
    """expr with Grafana's variables replaced as Grafana would: the
    intervals by a duration, a variable in a matcher by a regex."""
    for k, v in GRAFANA_VARS.items():
        expr = expr.replace(k, v)
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def metric_names(expr):
    """The metric names expr selects; raises ValueError on a token it does
    not know (an unknown function, say)."""
    m = re.match(r"^label_values\((?:(\w+)\s*,\s*)?(\w+)\)$", expr.strip())
    if m:                                   # Grafana's variable query
        return {m.group(1)} if m.group(1) else set()
    s = grafana_free(expr)
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', s)          # strings
    s = re.sub(r"\{[^}]*\}", " ", s)                   # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)                  # ranges, subqueries
    s = re.sub(r"\b(" + "|".join(LABEL_LISTS) + r")\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][\w:]*|\S", s):
        tok = m.group(0)
        if not re.match(r"[A-Za-z_:]", tok):
            if tok not in "()+-*/%^,.<>=!" and not tok.isdigit():
                raise ValueError(f"unexpected {tok!r} in {expr!r}")
            continue
        if re.match(r"\s*\(", s[m.end():]):
            if tok not in FUNCS:
                raise ValueError(f"unknown function {tok}() in {expr!r}")
        elif tok in KEYWORDS or tok in LABEL_LISTS:
            continue
        elif re.match(r"^\d", tok):
            continue
        else:
            names.add(tok)
    return names


def known(name, fams):
    """Whether name is a series the families write."""
    if name in fams:
        return True
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return base != name and fams.get(base, ("",))[0] == "histogram"


def main():
    dash = json.load(open(os.path.join(DOCKER, "grafana", "dashboards", "ringproxy.json")))
    exprs = expressions(dash)
    t.check(len(exprs) >= 20, f"the dashboard has its queries ({len(exprs)})")

    proxy, port = livestats.start(RP, TC)
    _, metrics = livestats.read(port)
    fams = {}
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", metrics, re.M):
        fams[m.group(1)] = (m.group(2),)

    used, bad, unknown = set(), [], []
    for where, e in exprs:
        try:
            names = metric_names(e)
        except ValueError as err:
            bad.append(f"{where}: {err}")
            continue
        if not names and not e.startswith("label_values("):
            bad.append(f"{where}: names no metric: {e}")
        used |= names
        unknown += [f"{where}: {n}" for n in sorted(names) if not known(n, fams)]
    t.check(not bad, "every query is read (known functions, at least one metric)", "\n".join(bad))
    t.check(not unknown, f"every metric the dashboard names is in the proxy's /metrics ({len(used)} names)",
            "\n".join(unknown))
    want = {"ringproxy_backend_up", "ringproxy_backend_http_responses_total", "ringproxy_replies_total",
            "ringproxy_request_seconds_bucket", "ringproxy_backend_response_seconds_bucket",
            "ringproxy_cache_hit_ratio", "ringproxy_backend_tier_hits_total", "ringproxy_backend_tier_misses_total",
            "ringproxy_tier_origin_fetches_per_second", "ringproxy_generation", "ringproxy_reload_moved_share"}
    t.check(want <= used, "it shows backends up, responses by code, latency, cache and tier hit ratios, "
            "origin fetches, reloads and keys moved", "missing: " + " ".join(sorted(want - used)))
    # the tokenizer itself: a name that is not a metric is caught
    t.check(not known("ringproxy_backend_nonexistent_total", fams) and
            metric_names('sum by (backend) (rate(ringproxy_x_total{backend=~"$backend"}[$__rate_interval]))')
            == {"ringproxy_x_total"}, "a query naming an absent metric would fail here")

    if not PROMTOOL:
        t.skip("promtool parses every query", "no promtool (Debian package prometheus)")
        t.skip("promtool check config accepts docker/prometheus/prometheus.yml", "no promtool")
        return
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": grafana_free(e)} for i, (_, e) in enumerate(exprs)
        if not e.startswith("label_values(")]}]}
    path = harness.write("dashboard-rules.json", json.dumps(rules))  # JSON is YAML
    p = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True, timeout=60)
    t.check(p.returncode == 0, "promtool parses every query (as recording rules)", p.stdout + p.stderr)
    p = subprocess.run([PROMTOOL, "check", "config", os.path.join(DOCKER, "prometheus", "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    t.check(p.returncode == 0, "promtool check config accepts docker/prometheus/prometheus.yml",
            p.stdout + p.stderr)


harness.run_main(t, main)
