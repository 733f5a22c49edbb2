#!/usr/bin/env python3
"""test_man.py -- the man pages as built: each renders with man -l and
groff without a single warning (-ww) and has its NAME, DESCRIPTION and SEE
ALSO; every key of the parser's table (--help-config) is in
ringproxy.ini(5) with its default, every option of `ringproxy -h` is in
ringproxy(8), and ringproxy(7) has its concepts' sections.
usage: test_man.py RINGPROXY ringproxy.8 ringproxy.ini.5 [MORE PAGES...]"""

import os
import re
import shutil
import subprocess
import sys

RP, MAN8, MAN5 = sys.argv[1:4]
PAGES = sys.argv[2:]
n = 0
bad = 0


def check(cond, what, detail=""):
    global n, bad
    n += 1
    print(("ok" if cond else "not ok"), n, "-", what, flush=True)
    if not cond:
        bad += 1
        for line in str(detail).splitlines()[:30]:
            print("#", line)


def render(page):
    """man -l's text of page at 80 columns, and what it said on stderr."""
    env = dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
    p = subprocess.run(["man", "--warnings", "-l", "-P", "cat", page], capture_output=True,
                       text=True, env=env, timeout=60)
    # overstrike bold and underline, if any, to plain text
    return p.returncode, re.sub(r".\x08", "", p.stdout), p.stderr


for tool in ("man", "groff"):
    if not shutil.which(tool):
        print(f"1..0 # SKIP no {tool} (bash tests/deps.sh test installs man-db and groff)")
        sys.exit(0)

texts = {}
for page in PAGES:
    name = os.path.basename(page)
    rc, text, err = render(page)
    texts[name] = text
    check(rc == 0 and text.strip(), f"man -l renders {name}", err)
    check(err == "", f"man --warnings -l {name}: no warning", err)
    g = subprocess.run(["groff", "-man", "-ww", "-z", page], capture_output=True, text=True, timeout=60)
    check(g.returncode == 0 and g.stderr == "", f"groff -ww -z {name}: no warning", g.stderr)
    for sec in ("NAME", "DESCRIPTION", "SEE ALSO") + (("SYNOPSIS",) if page in (MAN8, MAN5) else ()):
        check(re.search(rf"^{sec}$", text, re.M), f"{name} has {sec}")
    check(not re.search(r"UNDOCUMENTED|\]\(#|\*\*|`", text), f"{name}: no markup left over, nothing undocumented",
          "\n".join(re.findall(r".*(?:UNDOCUMENTED|\]\(#|\*\*|`).*", text)[:10]))

# every key of the table, in the (word-wrapped, hyphenated) text of the .5
help_out = subprocess.run([RP, "--help-config"], capture_output=True, text=True).stdout
keys, section, missing, wrong_default = [], None, [], []
lines = help_out.splitlines()
for i, line in enumerate(lines):
    m = re.match(r"^\[(.+)\]$", line)
    if m:
        section = m.group(1)
        continue
    m = re.match(r"^  (\S+)\s", line)
    if m and section:
        d = re.search(r"default: (.*?); ", lines[i + 1]) if i + 1 < len(lines) else None
        keys.append((section, m.group(1), d.group(1) if d else None))
five = texts[os.path.basename(MAN5)]
for sec in ("proxy", "ring", "health", "backend NAME"):
    check(re.search(rf"^   \[{re.escape(sec)}\]$", five, re.M), f"ringproxy.ini.5 has the [{sec}] heading")
# a key's entry in its own section's part of the page: [proxy] and [tls]
# both have listen and proxy_protocol
parts, heads = {}, list(re.finditer(r"^   \[(.+)\]$", five, re.M))
for i, h in enumerate(heads):
    parts[h.group(1)] = five[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(five)]
for section, key, default in keys:
    m = re.search(rf"^       {re.escape(key)} \(default: ([^)]*)\)", parts.get(section, five), re.M)
    if not m:
        missing.append(f"[{section}] {key}")
        continue
    want = {"(empty)": "empty", "(required)": "none: required"}.get(default, default)
    # a long default wraps: troff's hyphen (U+2010) at a break is its own
    if re.sub(r"\s*\n\s*", " ", m.group(1).replace("\u2010\n", "\n").replace("\u2010 ", "")) != want and \
            re.sub(r"\u2010?\n\s*", "", m.group(1)) != want:
        wrong_default.append(f"{key}: page says {m.group(1)!r}, --help-config {default!r}")
check(len(keys) >= 40, f"--help-config lists the table's keys ({len(keys)})")
check(not missing, f"every key of the table is in ringproxy.ini.5 ({len(keys) - len(missing)} of {len(keys)})",
      "\n".join(missing))
check(not wrong_default, "each with the table's default", "\n".join(wrong_default))

# each key's "Value:" says what it takes: only a header key takes a header name
values = {}
for m in re.finditer(r"^       (\S+) \(default: [^)]*\)\n(.*?)(?=^       \S+ \(default|\Z)", five, re.M | re.S):
    v = re.search(r"Value: (.*?)\.?$", " ".join(m.group(2).split()))
    values[m.group(1)] = v.group(1) if v else ""
named = sorted(k for k, v in values.items() if "header name" in v)
check(named == ["backend_header", "target_field"],
      f"only the header keys' values are 'a header name' ({named})")
check("Bearer" in values.get("admin_token", "") or "token" in values.get("admin_token", ""),
      f"admin_token's value is a token: {values.get('admin_token')!r}")
check(values.get("balance_factor", "").startswith("0 (off), or a number from 1 to 100"),
      f"balance_factor's value is 0 or 1 to 100: {values.get('balance_factor')!r}")

# every option of -h is in the .8
usage = subprocess.run([RP, "-h"], capture_output=True, text=True).stdout
opts = sorted(set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", usage)) - {"-"})
eight = texts[os.path.basename(MAN8)]
absent = [o for o in opts if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", eight)]
check(len(opts) >= 8 and not absent, f"every option of ringproxy -h is in ringproxy.8 ({len(opts)})",
      "missing: " + " ".join(absent))
for sec in ("OPTIONS", "SIGNALS", "EXIT STATUS", "FILES", "EXAMPLES"):
    check(re.search(rf"^{sec}$", eight, re.M), f"ringproxy.8 has {sec}")

seven = texts.get("ringproxy.7")
if seven is not None:
    for sec in ("THE RING", "BOUNDED LOADS", "REPLICAS", "HEALTH AND FAILOVER", "THE HOT-OBJECT CACHE",
                "RELOADS AND THE WARM RAMP", "FLEETS"):
        check(re.search(rf"^{sec}$", seven, re.M), f"ringproxy.7 has {sec}")
stats7 = texts.get("ringproxy-stats.7")
if stats7 is not None:
    for sec in ("METRICS", "STATS"):
        check(re.search(rf"^{sec}$", stats7, re.M), f"ringproxy-stats.7 has {sec}")

print(f"1..{n}")
sys.exit(1 if bad else 0)
