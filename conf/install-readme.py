#!/usr/bin/env python3
"""install-readme.py IN OUT -- the README as `meson install` puts it in
the doc directory: each relative link points at the file installed beside
it (tests/bench/README.md is benchmarks.md there, the page's screenshot
page.png, the cache suite's table cachetests.md), and the contributors'
notes, which stay in the source, are named as such instead of linked.
A relative link this table does not know fails the build, so the installed
README never links to a file that is not installed."""

import re
import sys

INSTALLED = {
    "tests/bench/README.md": "benchmarks.md",
    "tests/e2e/page.png": "page.png",
    "tests/cachetests/README.md": "cachetests.md",
}
SOURCE_ONLY = {"src/README.md", "tests/README.md"}


def main():
    src, dst = sys.argv[1:3]
    text = open(src, encoding="utf-8").read()
    unknown = []

    def link(m):
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        if target in INSTALLED:
            return f"[{label}]({INSTALLED[target]})"
        if target in SOURCE_ONLY:
            return f"{label} (in the source tree)"
        unknown.append(target)
        return m.group(0)

    out = re.sub(r"\[([^\]]*)\]\(([^)\s]+)\)", link, text)
    if unknown:
        sys.exit(f"install-readme.py: {src} links to {', '.join(unknown)}, which is not installed: "
                 "install it (meson.build) and add it to INSTALLED, or to SOURCE_ONLY")
    with open(dst, "w", encoding="utf-8") as f:
        f.write(out)


main()
