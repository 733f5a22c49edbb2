#!/usr/bin/env python3
"""test_stats_page.py -- ringproxy-stats(7) lists everything the proxy
emits: every series family of a running proxy's /metrics and every key of
its /stats (as paths, src/man/stats-page.py's json_paths) is an entry of
the page's source as the build made it, and no entry is UNDOCUMENTED. A
counter added to a writer but not reaching the page's sample, or a /stats
key nobody described, fails here.
usage: test_stats_page.py RINGPROXY TESTCACHE ringproxy-stats.7.scd"""

import importlib.util
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import livestats  # noqa: E402
from livestats import harness  # noqa: E402

RP, TC, PAGE = sys.argv[1:4]
t = harness.Tap()
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
spec = importlib.util.spec_from_file_location("stats_page", os.path.join(ROOT, "src", "man", "stats-page.py"))
stats_page = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stats_page)


def entries(text):
    """The page's terms: *name{labels}* (or *path*) at a line's start, as
    plain text, the labels dropped."""
    out = set()
    for m in re.finditer(r"^\*(.+?)\*", text, re.M):
        out.add(re.sub(r"\{.*$", "", m.group(1).replace("\\", "")))
    return out


def main():
    page = open(PAGE).read()
    listed = entries(page)
    proxy, port = livestats.start(RP, TC)
    doc, metrics = livestats.read(port)
    fams = stats_page.metric_families(metrics)
    paths = set(stats_page.json_paths(doc))
    t.check(len(fams) >= 60 and "ringproxy_backend_requests_total" in fams and
            "ringproxy_cache_hits_total" in fams, f"the proxy's /metrics has its families ({len(fams)})")
    t.check(len(paths) >= 100 and "backends[].check.status" in paths and "cache.hits" in paths and
            "last_reload.report" in paths, f"the proxy's /stats has its keys ({len(paths)})")
    missing = sorted(set(fams) - listed)
    t.check(not missing, f"every /metrics family is on ringproxy-stats(7) ({len(fams) - len(missing)} of {len(fams)})",
            "\n".join(missing))
    missing = sorted(paths - listed)
    t.check(not missing, f"every /stats key is on ringproxy-stats(7) ({len(paths) - len(missing)} of {len(paths)})",
            "\n".join(missing))
    undoc = re.findall(r"^\*(.+?)\*\n\t" + stats_page.UNDOCUMENTED, page, re.M)
    t.check(not undoc, "every /stats key on the page has a description (src/man/stats-keys.txt)",
            "\n".join(u.replace("\\", "") for u in undoc))


harness.run_main(t, main)
