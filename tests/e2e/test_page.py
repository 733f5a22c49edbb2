#!/usr/bin/env python3
"""test_page.py -- the admin page (/) as a browser shows it: headless
Chromium loads it from the admin listener; the DOM has one row per backend
with its name and state (as /stats has them), an SVG ring with one arc per
run of a backend's consecutive points (counted on the independent ring
model), the last reload's moved arcs, no console message, and it fits a
1280-pixel-wide laptop screen without scrolling sideways. A screenshot is
saved (RINGPROXY_SCREENSHOT=FILE also copies it there).
usage: test_page.py RINGPROXY TESTCACHE"""

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import ringref  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VNODES = 24
WIDTH = 1280


class Dom(html.parser.HTMLParser):
    """Every element's tag and attributes, and each backend row's text."""

    def __init__(self):
        super().__init__()
        self.elems = []
        self.rows = {}
        self._row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elems.append((tag, a))
        if tag == "tr" and "backend" in (a.get("class") or "").split():
            self._row = a.get("data-backend")
            self.rows[self._row] = {"state": a.get("data-state"), "text": ""}

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._row:
            self.rows[self._row]["text"] += data

    def find(self, tag, cls=None):
        return [a for g, a in self.elems if g == tag and (cls is None or cls in (a.get("class") or "").split())]


def chromium(url, *args, timeout=90):
    """Run headless Chromium on url; (returncode, stdout, stderr)."""
    with tempfile.TemporaryDirectory(prefix="rp-chromium-") as ud:
        p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            f"--user-data-dir={ud}", "--enable-logging=stderr", "--v=0",
                            f"--window-size={WIDTH},900", "--hide-scrollbars", *args, url],
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def console(stderr):
    """The console messages Chromium logged (any: the page has no script)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def runs(ring):
    """Arcs the page must draw, per backend: runs of consecutive points of
    one backend, going round once."""
    n = len(ring.owner)
    starts = [i for i in range(n) if ring.owner[i] != ring.owner[i - 1]]
    if not starts:
        return {ring.owner[0]: 1}
    out = {}
    for i in starts:
        out[ring.owner[i]] = out.get(ring.owner[i], 0) + 1
    return out


def self_check():
    """The console check catches what it must: a page with an error."""
    with tempfile.TemporaryDirectory(prefix="rp-page-") as d:
        f = os.path.join(d, "bad.html")
        with open(f, "w") as fh:
            fh.write("<!doctype html><title>x</title><script>throw new Error('page-test-probe')</script>")
        rc, out, err = chromium("file://" + f, "--dump-dom")
    t.check(any("page-test-probe" in line for line in console(err)),
            "self-check: a script error on a page shows as a console line", err[-2000:])


def probe_width(page):
    """The page (self-contained, so a copy renders the same) with a probe
    script that writes its widths and any error into the DOM."""
    probe = ("<script>var E=[];addEventListener('error',function(e){E.push(String(e.message))});"
             "addEventListener('load',function(){var d=document.createElement('div');d.id='probe';"
             "d.setAttribute('data-scroll',document.documentElement.scrollWidth);"
             "d.setAttribute('data-client',document.documentElement.clientWidth);"
             "d.setAttribute('data-errors',JSON.stringify(E));document.body.appendChild(d)})</script>")
    with tempfile.TemporaryDirectory(prefix="rp-page-") as d:
        f = os.path.join(d, "page.html")
        with open(f, "w") as fh:
            fh.write(page.replace("<head>", "<head>" + probe, 1))
        rc, out, err = chromium("file://" + f, "--dump-dom", "--virtual-time-budget=3000")
    m = re.search(r'id="probe" data-scroll="(\d+)" data-client="(\d+)" data-errors="([^"]*)"', out)
    return m


def main():
    if not CHROMIUM:
        t.skip("the page in a browser", "no chromium (bash tests/deps.sh test installs it)")
        return
    self_check()
    names = ["cache-1", "cache-2", "cache-3", "cache-4"]
    caches = [harness.Cache(TC, n) for n in names]
    ports = {c.name: c.port for c in caches}
    opts = {"admin_listen": "127.0.0.1:0"}
    path = harness.write("page.ini", harness.conf_by_name(names[:3], ports, ring={"vnodes": VNODES},
                                                          proxy=opts, health={"fall": 1, "backoff": "60s"},
                                                          backend={"cache-2": {"max_inflight": 40}}))
    proxy = harness.Proxy(RP, path=path)
    m = proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10)
    port = int(m.group(1))
    harness.load(proxy.port, lambda i: f"/img/{i % 300}.jpg", clients=8, seconds=2, max_requests=1500)
    # a reload that adds cache-4: its arcs are the moved ones
    harness.write("page.ini", harness.conf_by_name(names, ports, ring={"vnodes": VNODES},
                                                   proxy=opts, health={"fall": 1, "backoff": "60s"},
                                                   backend={"cache-2": {"max_inflight": 40}}))
    line = proxy.reload()
    t.check(line and line.startswith("reload 2: +cache-4"), "reload 2 adds cache-4", str(line))
    caches[0].stop()                # cache-1 goes down on its first failure
    harness.load(proxy.port, lambda i: f"/img/{i % 300}.jpg", clients=8, seconds=2, max_requests=1500)
    stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10).read())
    states = {b["name"]: b["state"] for b in stats["backends"]}
    t.check(states["cache-1"] == "down" and states["cache-2"] == "up", "/stats: cache-1 down, the rest up",
            str(states))

    url = f"http://127.0.0.1:{port}/"
    shot = harness.tmp_path("page.png")
    rc, dom_text, err = chromium(url, "--dump-dom")
    t.check(rc == 0 and "</html>" in dom_text, "Chromium loaded the page", err[-2000:])
    msgs = console(err)
    t.check(not msgs, "no console message while loading it", "\n".join(msgs))
    dom = Dom()
    dom.feed(dom_text)
    t.check(sorted(dom.rows) == names, "one row per backend, by name", str(sorted(dom.rows)))
    t.check(all(dom.rows[n]["state"] == states[n] for n in names),
            "each row carries the backend's state as /stats says it", str({n: r["state"] for n, r in dom.rows.items()}))
    t.check(all(n in r["text"] for n, r in dom.rows.items()) and "down" in dom.rows["cache-1"]["text"] and
            "up" in dom.rows["cache-2"]["text"] and "hard cap 40" in dom.rows["cache-2"]["text"],
            "each row shows the name, the state in words and its caps",
            str({n: r["text"] for n, r in dom.rows.items()}))
    title = re.search(r"<title>([^<]*)</title>", dom_text)
    tile = re.search(r'<div class="tile" id="t-up"><span>[^<]*</span><b>([^<]*)</b>', dom_text)
    t.check(title and title.group(1) == "ringproxy: 3 of 4 up" and tile and tile.group(1) == "3 of 4",
            "the title and a tile say how many are up: 3 of 4",
            (title.group(0) if title else "") + (tile.group(0) if tile else ""))
    t.check("failed requests: connect: Connection refused x1" in dom.rows["cache-1"]["text"] and
            re.search(r"down for \d+ s", dom.rows["cache-1"]["text"]),
            "the down backend's row says for how long and why", dom.rows["cache-1"]["text"])
    ring = ringref.Ring([(n, 1.0) for n in names], vnodes=VNODES)
    want = runs(ring)
    arcs = dom.find("path", "arc")
    got = {}
    for a in arcs:
        got[a["data-backend"]] = got.get(a["data-backend"], 0) + 1
    svg = dom.find("svg")
    t.check(any(s.get("id") == "ring" for s in svg), "an SVG ring")
    t.check(got == want, f"an arc per run of points: {sum(want.values())} arcs, per backend as the ring model has them",
            f"page {got}, model {want}")
    t.check(all("down" in (a.get("class") or "").split() for a in arcs if a["data-backend"] == "cache-1") and
            not any("down" in (a.get("class") or "").split() for a in arcs if a["data-backend"] != "cache-1"),
            "the down backend's arcs are marked down")
    moved = dom.find("path", "moved")
    new_runs = want["cache-4"]
    t.check(0 < len(moved) <= new_runs, f"the last reload's moved arcs are marked ({len(moved)}, at most cache-4's "
            f"{new_runs} runs)")
    ext = [a for g, a in dom.elems if any(k in ("src", "href") and v and re.match(r"(https?:)?//", v)
                                            for k, v in a.items())]
    t.check(not ext and not dom.find("script"), "self-contained: no script, nothing loaded from elsewhere",
            str(ext))
    labels = " ".join(a.get("aria-label", "") for a in svg)
    t.check("Requests per second" in dom_text and "Share of keys" in dom_text and "requests_total" not in dom_text,
            "labels in words, not counter names", labels[:200])

    page = urllib.request.urlopen(url, timeout=10).read().decode()
    m = probe_width(page)
    t.check(m is not None, "the probe ran in the page", page[:200])
    if m:
        t.check(int(m.group(1)) <= int(m.group(2)) <= WIDTH,
                f"fits {WIDTH} pixels without scrolling sideways (content {m.group(1)}, window {m.group(2)})")
        t.check(m.group(3) == "[]", "no script error in the page", m.group(3))

    rc, _, err = chromium(url, f"--screenshot={shot}")
    t.check(rc == 0 and os.path.getsize(shot) > 10000, f"a screenshot ({shot})", err[-1000:])
    if os.environ.get("RINGPROXY_SCREENSHOT") and os.path.exists(shot):
        shutil.copy(shot, os.environ["RINGPROXY_SCREENSHOT"])
    proxy.stop()


harness.run_main(t, main)
