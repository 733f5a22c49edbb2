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
import socket
import subprocess
import sys
import tempfile
import time
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


def probe_style(page, selector, prop):
    """The computed style prop of the first element selector names, as
    Chromium draws the page (a copy with a probe script); None if none."""
    probe = ("<script>addEventListener('load',function(){var e=document.querySelector(%s);"
             "var d=document.createElement('div');d.id='probe';"
             "d.setAttribute('data-v',e?getComputedStyle(e)[%s]:'none');document.body.appendChild(d)})</script>"
             % (json.dumps(selector), json.dumps(prop)))
    with tempfile.TemporaryDirectory(prefix="rp-page-") as d:
        f = os.path.join(d, "page.html")
        with open(f, "w") as fh:
            fh.write(page.replace("<head>", "<head>" + probe, 1))
        rc, out, err = chromium("file://" + f, "--dump-dom", "--virtual-time-budget=3000")
    m = re.search(r'id="probe" data-v="([^"]*)"', out)
    return m and m.group(1)


def tile_text(dom_text, tid):
    """A tile's value and its small print, as text."""
    m = re.search(r'<div class="[^"]*" id="%s"><span>[^<]*</span><b>([^<]*)</b>(?:<small>(.*?)</small>)?</div>'
                  % tid, dom_text, re.S)
    return (m.group(1), re.sub(r"<[^>]+>", " ", m.group(2) or "")) if m else (None, "")


def headline(names, ports):
    """A cache in front that answers most requests: the page's headline is
    what clients ask per second, as /stats' rates client_requests says,
    with the far smaller part sent to the caches and the cache's share
    under it. Then a reload with a warm ramp: a line with its progress and
    the time left; once it has ended the line is gone and so is
    "ramping over" from the list of changes. A drain through ringproxy ctl:
    its line, and the change in that list."""
    kw = dict(proxy={"admin_listen": "127.0.0.1:0"}, cache={"size": "4m", "min_uses": 1})
    path = harness.write("page-headline.ini", harness.conf_by_name(names[:2], ports, ring={"vnodes": VNODES}, **kw))
    proxy = harness.Proxy(RP, path=path, tag="page-headline")
    port = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    url = f"http://127.0.0.1:{port}/"
    time.sleep(1.5)                 # a rates sample before the load: its rates are the load's
    res = harness.load(proxy.port, lambda i: f"/hot/{i % 10}.jpg", clients=4, seconds=3, max_requests=30000)
    ok = sum(1 for r in res if r[1] == 200)
    time.sleep(1.2)                 # a rates sample after the load
    rates = json.loads(urllib.request.urlopen(url + "stats", timeout=10).read())["rates"]["10s"]
    rc, dom_text, err = chromium(url, "--dump-dom")
    value, small = tile_text(dom_text, "t-requests")
    sent = re.search(r"([0-9.]+) sent to the caches", small)
    share = re.search(r"([0-9.]+)% answered by its own cache", small)
    t.check(ok >= 500 and rates["client_requests"] > 10 * max(rates["requests"], 0.1) and value and
            float(value) >= 0.5 * rates["client_requests"] and sent and float(sent.group(1)) < float(value) / 10,
            f"the headline is the clients' rate ({value}/s; /stats {rates['client_requests']:.0f}/s), "
            f"the part sent to the caches under it ({sent and sent.group(1)}/s)", f"{small} ({ok} answered; {rates})")
    t.check(share and float(share.group(1)) >= 90, "with the share its own cache answered", small)

    ramped = harness.conf_by_name(names, ports, ring={"vnodes": VNODES, "ramp": "6s"}, **kw)
    harness.write("page-headline.ini", ramped)
    line = proxy.reload()
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    prog = re.search(r'<p class="progress" id="ramp">([^<]*)</p>', page)
    t.check(line and "ramping over 6s" in line and prog and
            re.fullmatch(r"ramp: \d+% of moved keys switched, \d+ s left", prog.group(1)),
            "a warm ramp in progress: 'ramp: N% of moved keys switched, N s left'", prog and prog.group(1))
    harness.wait_until(lambda: not re.search(r'id="ramp"', urllib.request.urlopen(url, timeout=10).read().decode()),
                       15)
    rc2, dom_text, err = chromium(url, "--dump-dom")
    items = [x for _, x in reload_items(dom_text)]
    rel = [x for x in items if "reload 2:" in x]
    t.check(not re.search(r'id="ramp"', dom_text) and rel and "ramping over" not in rel[0] and
            "warm ramp has ended" in rel[0],
            "once the ramp has ended: no ramp line, and no 'ramping over' in the list", str(rel))
    # what ringproxy ctl drain NAME 30s sends (the file's admin_listen is port 0)
    req = urllib.request.Request(url + f"backend?name={names[1]}&state=drain&duration=30s", data=b"",
                                 method="POST")
    rc = 0 if urllib.request.urlopen(req, timeout=10).status == 200 else 1
    rc2, dom_text, err = chromium(url, "--dump-dom")
    items = [x for _, x in reload_items(dom_text)]
    drain = re.search(r'<p class="progress drain" data-backend="%s">([^<]*)</p>' % names[1], dom_text)
    t.check(rc == 0 and drain and re.fullmatch(r"drain %s: \d+%% of its keys moved to their next owners, "
                                                r"\d+ s left" % names[1], drain.group(1)),
            "a drain: 'drain NAME: N% of its keys moved to their next owners, N s left'", drain and drain.group(1))
    t.check(items and ("ctl drain %s over 30s" % names[1]) in items[0] and "changed" in items[0],
            "the ctl change heads the list of changes", str(items[:2]))
    proxy.stop()


def many():
    """A tier past the page's 100 rows (120 backends, one of them down,
    far down by name): the table holds the 100 most troubled, the down one
    first, and says how many more there are and where they are."""
    tc = harness.Cache(TC, "many")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]       # closed again: nothing listens
    names = [f"be-{i:03d}" for i in range(120)]
    ports = {n: tc.port for n in names}
    ports["be-117"] = dead
    path = harness.write("page-many.ini", harness.conf_by_name(
        names, ports, ring={"vnodes": 8}, proxy={"admin_listen": "127.0.0.1:0"},
        health={"fall": 1, "backoff": "60s"}))
    proxy = harness.Proxy(RP, path=path, tag="page-many")
    port = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    harness.load_until(proxy.port, lambda i: f"/m/{i}.jpg", clients=8, requests=3000)
    stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10).read())
    states = {b["name"]: b["state"] for b in stats["backends"]}
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
    dom = Dom()
    dom.feed(page)
    rows = re.findall(r'<tr class="backend" data-backend="([^"]+)"', page)
    more = re.search(r'<tr class="more">(.*?)</tr>', page, re.S)
    t.check(states.get("be-117") == "down" and len(rows) == 100 and rows[0] == "be-117" and
            len(set(rows)) == 100 and dom.rows["be-117"]["state"] == "down",
            "120 backends: the page's table has the 100 most troubled, the one down first",
            f"be-117 {states.get('be-117')}, {len(rows)} rows, first {rows[:3]}")
    t.check(more and "of 120 backends" in more.group(1) and "other 20" in more.group(1) and
            "/stats" in more.group(1), "and says where the other 20 are", more and more.group(1))
    proxy.stop()
    tc.stop()


def main():
    many()
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
    harness.load_until(proxy.port, lambda i: f"/img/{i % 300}.jpg", clients=8, requests=1500)
    # a reload that adds cache-4: its arcs are the moved ones
    harness.write("page.ini", harness.conf_by_name(names, ports, ring={"vnodes": VNODES},
                                                   proxy=opts, health={"fall": 1, "backoff": "60s"},
                                                   backend={"cache-2": {"max_inflight": 40}}))
    line = proxy.reload()
    t.check(line and line.startswith("reload 2: +cache-4"), "reload 2 adds cache-4", str(line))
    time.sleep(1.5)                 # a rates sample first: cache-1's errors fall after it, in its sparkline
    caches[0].stop()                # cache-1 goes down on its first failure
    harness.load_until(proxy.port, lambda i: f"/img/{i % 300}.jpg", clients=8, requests=1500)
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
    tile = re.search(r'<div class="tile amber" id="t-up"><span>[^<]*</span><b>([^<]*)</b>', dom_text)
    t.check(title and title.group(1) == "ringproxy: 3 of 4 up" and tile and tile.group(1) == "3 of 4",
            "the title and a tile say how many are up: 3 of 4",
            (title.group(0) if title else "") + (tile.group(0) if tile else ""))
    value, small = tile_text(dom_text, "t-requests")
    t.check(value and "sent to the caches" in small and "answered by its own cache" not in small,
            "without a cache ([cache] size 0) the headline has no cache share under it", small)
    colour = probe_style(urllib.request.urlopen(url, timeout=10).read().decode(), "#t-up b", "color")
    t.check(colour == "rgb(181, 71, 8)", "3 of 4 up reads amber, not black", str(colour))
    t.check("down: no traffic" in dom.rows["cache-1"]["text"] and
            not re.search(r"\b\d+\.\d%", dom.rows["cache-1"]["text"]),
            "the down backend's row shows no last rates and no error rate", dom.rows["cache-1"]["text"])
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
    t.check("Client requests per second" in dom_text and "Share of keys" in dom_text and "requests_total" not in dom_text,
            "labels in words, not counter names", labels[:200])

    page = urllib.request.urlopen(url, timeout=10).read().decode()
    m = probe_width(page)
    t.check(m is not None, "the probe ran in the page", page[:200])
    if m:
        t.check(int(m.group(1)) <= int(m.group(2)) <= WIDTH,
                f"fits {WIDTH} pixels without scrolling sideways (content {m.group(1)}, window {m.group(2)})")
        t.check(m.group(3) == "[]", "no script error in the page", m.group(3))

    # the sparklines: a red errors line only where there were errors, with its scale
    errs = {b["name"]: b["connect_errors"] + b["timeouts"] + b["bad_responses"] for b in stats["backends"]}
    # the sparkline's points are 5 s steps: wait for the step with cache-1's errors
    harness.wait_until(lambda: re.search(r'data-backend="cache-1".*?class="errors"[^\n]*</tr>',
                                         urllib.request.urlopen(url, timeout=10).read().decode()), 12)
    rc, dom_text, err = chromium(url, "--dump-dom")
    lines = {}
    for name in names:
        row = re.search(r'<tr class="backend" data-backend="%s".*?</tr>' % re.escape(name), dom_text, re.S)
        lines[name] = row and ('class="errors"' in row.group(0), "errors, top" in row.group(0),
                               re.search(r"top [0-9.]+/s", row.group(0)) is not None)
    healthy = [n for n in names if errs[n] == 0]
    t.check(healthy and all(lines[n] == (False, False, True) for n in healthy),
            f"healthy rows ({healthy}) draw no errors line, and say their requests' scale", str(lines))
    failed = [n for n in names if errs[n] > 0]
    t.check(failed and all(lines[n] == (True, True, True) for n in failed),
            f"a row with errors ({failed}) draws them with their own scale", str(lines))
    cap_text = dom.rows["cache-3"]["text"]
    spilled = {b["name"]: b["rates"]["5m"]["spilled_away"] for b in stats["backends"]}
    t.check(spilled["cache-3"] > 0 or (not re.search(r"spills at \d+ in flight", cap_text) and
                                       "cap grows with load" in cap_text),
            "the bounded-load cap of a backend that spilled nothing: 'cap grows with load', no 'spills at 1'",
            f"{cap_text} (spilled {spilled['cache-3']}/s)")

    rc, _, err = chromium(url, f"--screenshot={shot}")
    t.check(rc == 0 and os.path.getsize(shot) > 10000, f"a screenshot ({shot})", err[-1000:])
    if os.environ.get("RINGPROXY_SCREENSHOT") and os.path.exists(shot):
        shutil.copy(shot, os.environ["RINGPROXY_SCREENSHOT"])
    proxy.stop()
    details(names[1:], ports)
    headline(names[1:], ports)


def reload_items(dom_text):
    """The reload list as shown: (number the browser draws or None, text)."""
    m = re.search(r'<(ol|ul) class="reloads"([^>]*)>(.*?)</\1>', dom_text, re.S)
    if not m:
        return []
    items = re.findall(r"<li[^>]*>(.*?)</li>", m.group(3), re.S)
    texts = [re.sub(r"<[^>]+>", "", x) for x in items]
    if m.group(1) == "ul":
        return [(None, x) for x in texts]
    rev = "reversed" in m.group(2)
    return [((len(texts) - i) if rev else (i + 1), x) for i, x in enumerate(texts)]


def details(names, ports):
    """A small cache's size in KiB; the reload list after a refused reload;
    the file on disk that is not what runs."""
    kw = dict(ring={"vnodes": VNODES}, proxy={"admin_listen": "127.0.0.1:0"}, cache={"size": "4m", "min_uses": 1})
    path = harness.write("page-details.ini", harness.conf_by_name(names[:2], ports, **kw))
    proxy = harness.Proxy(RP, path=path, tag="page-details")
    port = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    url = f"http://127.0.0.1:{port}/"
    for i in range(3):
        proxy.get(f"/small/{i}.jpg")
    stats = json.loads(urllib.request.urlopen(url + "stats", timeout=10).read())
    size = stats["cache"]["bytes"] if stats.get("cache") else 0
    rc, dom_text, err = chromium(url, "--dump-dom")
    tile = re.search(r'id="t-cache".*?<small>([^<]*)</small>', dom_text, re.S)
    t.check(0 < size < 104857 and tile and re.search(r"3 objects, [0-9.]+ (KiB|B)$", tile.group(1)) and
            "0.0 MiB" not in dom_text,
            f"a cache holding {size} bytes reads in KiB, not '0.0 MiB'", tile and tile.group(1))
    t.check(not re.search(r'id="conf-disk"', dom_text), "the file on disk is what runs: nothing said")

    harness.write("page-details.ini", harness.conf_by_name(names, ports, **kw))
    first = proxy.reload()
    harness.write("page-details.ini", harness.conf_by_name(names, ports, **kw) + "\n[backend bad]\nurl = ftp://x\n")
    refused = proxy.reload()
    rc, dom_text, err = chromium(url, "--dump-dom")
    disk = re.search(r'<p class="warn" id="conf-disk" data-on-disk="(\w+)">(.*?)</p>', dom_text, re.S)
    t.check(refused and refused.startswith("reload failed") and disk and disk.group(1) == "differs" and
            "differs from the running config" in disk.group(2) and "refused" in disk.group(2),
            "after a refused reload the page says the file on disk differs from the running config",
            disk and disk.group(0))
    harness.write("page-details.ini", harness.conf_by_name(names[:2], ports, **kw))
    second = proxy.reload()
    with open(path, "a") as f:
        f.write("; an edit not reloaded\n")
    rc, dom_text, err = chromium(url, "--dump-dom")
    items = reload_items(dom_text)
    ids = [re.match(r".*?\b(applied|refused)\s+(reload (\d+):)?", x, re.S) for _, x in items]
    shown = [(n, m.group(1) if m else None, m.group(3) if m else None) for (n, _), m in zip(items, ids)]
    t.check(first and first.startswith("reload 2") and second and second.startswith("reload 3") and
            [(k, i) for _, k, i in shown] == [("applied", "3"), ("refused", None), ("applied", "2")] and
            all(n is None or (i is not None and n == int(i)) for n, _, i in shown),
            "the reload list after a refused reload: no list number that is not the reload's id", str(shown))
    disk = re.search(r'<p class="warn" id="conf-disk" data-on-disk="(\w+)">(.*?)</p>', dom_text, re.S)
    t.check(disk and disk.group(1) == "differs" and "edited since it was loaded" in disk.group(2),
            "a file edited and not reloaded: the page says it differs", disk and disk.group(0))
    doc = json.loads(urllib.request.urlopen(url + "stats", timeout=10).read())
    t.check(doc["config"].get("on_disk") == "differs", "/stats config.on_disk says so too", str(doc["config"]))
    proxy.stop()


harness.run_main(t, main)
