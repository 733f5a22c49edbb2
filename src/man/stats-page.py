#!/usr/bin/env python3
"""stats-page.py -- ringproxy-stats(7) from what the writers write.

usage: stats-page.py TEMPLATE KEYS SAMPLE OUT
  TEMPLATE  ringproxy-stats.7.scd.in: the page, @METRICS@ and @JSON@ where
            the lists go
  KEYS      stats-keys.txt: "PATH<TAB>description" for the /stats keys
            that no Prometheus series or rate list describes
  SAMPLE    the output of `ringproxy --help-stats`: /metrics and /stats of
            a sample reading, and the rate lists' help
  OUT       the scdoc page

Every series and key of the sample is listed, so a counter added to a
list in stats-t.h (or a line added to a writer) is on the page at the
next build. A /stats key that nothing describes is listed as
UNDOCUMENTED, which tests/unit/test_stats_page.py fails on.
The same module is imported by that test for json_paths() and
metric_families()."""

import json
import re
import sys

UNDOCUMENTED = "UNDOCUMENTED"
HIST_KEYS = {"count", "sum", "p50", "p90", "p99"}
WINDOWS = ("10s", "5m")


def split_sample(text):
    """{'prometheus': str, 'json': str, 'rates': str} of --help-stats."""
    parts, name = {}, None
    for line in text.splitlines(keepends=True):
        m = re.match(r"^@@ (\w+)$", line)
        if m:
            name = m.group(1)
            parts[name] = ""
        elif name:
            parts[name] += line
    return parts


def metric_families(text):
    """{name: (type, help, labels)} of Prometheus text; a histogram's
    _bucket, _sum and _count samples belong to its family."""
    fam = {}
    for line in text.splitlines():
        m = re.match(r"^# (HELP|TYPE) (\S+) ?(.*)$", line)
        if m:
            t, h, labels = fam.get(m.group(2), ("", "", set()))
            if m.group(1) == "HELP":
                h = m.group(3)
            else:
                t = m.group(3)
            fam[m.group(2)] = (t, h, labels)
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*?)\})? ", line)
        if not m:
            continue
        name = m.group(1)
        if name not in fam:
            name = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in fam and m.group(2):
            fam[name][2].update(re.findall(r"(\w+)=\"", m.group(2)))
    return fam


def json_paths(doc):
    """The keys of a /stats document as paths, in the document's order:
    a.b for objects, a[].b for arrays of objects, rates.WINDOW.x for each
    rate window, and a histogram ({count, sum, p50, p90, p99}) as the one
    path of its object."""
    out = []

    def add(p):
        if p not in out:
            out.append(p)

    def walk(v, path):
        if isinstance(v, dict):
            if path and set(v) == HIST_KEYS:
                add(path)
                return
            for k, x in v.items():
                if k in WINDOWS and path.endswith("rates"):
                    k = "WINDOW"
                walk(x, f"{path}.{k}" if path else k)
            if path and not v:
                add(path)
        elif isinstance(v, list):
            if not v:
                add(path + "[]")
            for x in v:
                walk(x, path + "[]")
        else:
            add(path)
    walk(doc, "")
    return out


def esc(s):
    """s as scdoc text: no underline, bold or table (a line's first [)."""
    s = s.replace("\\", "\\\\").replace("_", "\\_").replace("*", "\\*")
    return "\\" + s if s.startswith(("[", "|", "]", "-")) else s


def describe(path, fam, rates, keys):
    """A /stats path's description: stats-keys.txt's, else the series of
    the same name's help, else the rate list's."""
    if path in keys:
        return keys[path]
    scope, rest = ("backend_", path[len("backends[]."):]) if path.startswith("backends[].") else ("", path)
    for prefix, sub in (("cache.", "cache_"), ("tier.", "tier_")):
        if rest.startswith(prefix):
            scope, rest = sub, rest[len(prefix):]
    m = re.match(r"^latency\.(\w+)$", rest)
    if m:
        f = fam.get(f"ringproxy_{scope}{m.group(1)}_seconds")
        if f:
            return f[1] + "; {count, sum, p50, p90, p99} in seconds"
    m = re.match(r"^rates\.WINDOW\.(\w+)$", rest)
    if m:
        h = rates.get(("backend" if scope == "backend_" else "proxy", m.group(1)))
        if h:
            return h + ", over the last 10 s (10s) and 5 min (5m)"
    for suffix in ("", "_total"):
        f = fam.get(f"ringproxy_{scope}{rest}{suffix}")
        if f:
            return re.sub(r" \(deprecated.*$", "", f[1])
    return UNDOCUMENTED


def render(template, keys_text, sample):
    parts = split_sample(sample)
    fam = metric_families(parts["prometheus"])
    doc = json.loads(parts["json"])
    rates = {}
    for line in parts["rates"].splitlines():
        scope, name, h = line.split(" ", 2)
        rates[(scope, name)] = h
    keys = {}
    for line in keys_text.splitlines():
        if line.strip() and not line.startswith("#"):
            k, d = line.split("\t", 1)
            keys[k] = d.strip()
    metrics = []
    for name, (t, h, labels) in fam.items():
        lab = sorted(labels - {"le"})
        sig = name + ("{" + ",".join(lab) + "}" if lab else "")
        extra = " (series: \\_bucket{le}, \\_sum, \\_count)" if t == "histogram" else ""
        metrics.append(f"*{esc(sig)}* ({t}){extra}\n\t{esc(h)}\n")
    # an object that may also be null (a drain, the last reload) has a
    # line of its own in stats-keys.txt: list it before its first key
    order = []
    for p in json_paths(doc):
        parts = p.split(".")
        for i in range(1, len(parts)):
            a = ".".join(parts[:i])
            if a in keys and a not in order:
                order.append(a)
        if p not in order:
            order.append(p)
    jlines = [f"*{esc(p)}*\n\t{esc(describe(p, fam, rates, keys))}\n" for p in order]
    out = []
    for line in template.splitlines(keepends=True):
        if line.strip() == "@METRICS@":
            out.append("\n".join(metrics))
        elif line.strip() == "@JSON@":
            out.append("\n".join(jlines))
        else:
            out.append(line)
    return "".join(out)


def main():
    template, keys, sample, dest = sys.argv[1:5]
    page = render(open(template).read(), open(keys).read(), open(sample).read())
    with open(dest, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
