#!/usr/bin/env python3
"""test_watch.py -- [proxy] watch_config = on: a change of the config file
reloads it as SIGHUP does, however the file is changed (written in place,
a new file renamed over it, a Kubernetes ConfigMap volume's ..data symlink
swapped, a symlinked file written in place), once per burst of writes; a
bad file is reported and the running config kept; the same content or a
file not watched does not reload.
usage: test_watch.py RINGPROXY TESTCACHE"""

import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
OUTCOME = r": (reload \d+: [^\n]*|reload failed: [^\n]*)\n"


def conf(caches, names, watch="on", extra=""):
    """A config with the caches named in names, watch_config as given."""
    return H.conf_text([c for c in caches if c.name in names],
                       proxy={"watch_config": watch}, ring={"balance_factor": 0}) + extra


def write_in_place(path, text):
    """Truncate and write the same inode (what `cat > file` does)."""
    with open(path, "w") as f:
        f.write(text)


def rename_over(path, text):
    """A new file renamed over the old (an editor, sed -i)."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.rename(path + ".new", path)


def outcomes(px, since):
    """The reload outcome lines logged since byte offset since."""
    return re.findall(OUTCOME, px.log()[since:])


def next_outcome(px, since, timeout=5):
    """The first reload outcome line since since, waiting up to timeout s."""
    m = px.wait_log(OUTCOME, timeout=timeout, since=since)
    return m.group(1) if m else None


def serves(px, name):
    """True when some of 200 keys are served by the backend name."""
    got = H.backends_of(px.port, [f"/w/{i}.jpg" for i in range(200)], time.monotonic() + 20)
    return name in got.values()


def plain_file(caches):
    d = H.tmp_path("plain")
    os.mkdir(d)
    path = os.path.join(d, "ringproxy.ini")
    write_in_place(path, conf(caches, {"c1", "c2"}))
    px = H.Proxy(RP, tag="plain", path=path)
    t.check(px.wait_log(r"watch_config: following "), "watch_config = on: the proxy says it follows the file")

    since = px.log_size()
    write_in_place(path, conf(caches, {"c1", "c2", "c3"}))
    r = next_outcome(px, since)
    t.check(r and r.startswith("reload 2: +c3"), f"written in place: reloaded ({r})")
    t.check(serves(px, "c3"), "... and the new backend takes keys")

    since = px.log_size()
    rename_over(path, conf(caches, {"c1", "c3"}))
    r = next_outcome(px, since)
    t.check(r and r.startswith("reload 3: -c2"), f"a new file renamed over it: reloaded ({r})")

    # a burst: 25 writes 10 ms apart, in place and by rename, all different
    since = px.log_size()
    stamps = []
    for i in range(25):
        text = conf(caches, {"c1", "c3"}, extra=f"; edit {i}\n")
        (write_in_place if i % 2 else rename_over)(path, text)
        stamps.append(time.monotonic())
        time.sleep(0.01)
    r = next_outcome(px, since)
    time.sleep(1.0)
    got = outcomes(px, since)
    # a pause of the writer longer than the quiet period (a loaded
    # machine) rightly ends a burst: allow one more reload per such pause
    pauses = sum(1 for a, b in zip(stamps, stamps[1:]) if b - a > 0.15)
    t.check(r and 1 <= len(got) <= 1 + pauses and got[0].startswith("reload 4:"),
            f"a burst of 25 writes: one reload ({len(got)}, writer pauses {pauses}: {got})")

    # the same bytes again (touch, a rewrite with the same text): no reload
    since = px.log_size()
    os.utime(path)
    write_in_place(path, open(path).read())
    time.sleep(0.8)
    t.check(outcomes(px, since) == [], "the same content written again: no reload")

    # another file in the directory: no reload
    since = px.log_size()
    write_in_place(os.path.join(d, "notes.txt"), "unrelated\n")
    rename_over(os.path.join(d, ".ringproxy.ini.swp"), "editor swap\n")
    time.sleep(0.8)
    t.check(outcomes(px, since) == [], "other files in the directory: no reload")

    # a bad file: reported, the running config kept; fixed: reloaded
    since = px.log_size()
    write_in_place(path, conf(caches, {"c1", "c3"}).replace("[ring]", "[rnig]"))
    r = next_outcome(px, since)
    t.check(r and r.startswith("reload failed:") and "did you mean [ring]?" in px.log()[since:],
            f"a bad file: the reload fails and says why ({r})")
    t.check(serves(px, "c3") and not serves(px, "c2"), "... and the running config keeps serving")
    since = px.log_size()
    write_in_place(path, conf(caches, {"c1", "c2", "c3"}))
    r = next_outcome(px, since)
    t.check(r and re.match(r"reload \d+: \+c2", r), f"the file fixed: reloaded ({r})")

    # watch_config turned off by a reload: later changes wait for SIGHUP
    since = px.log_size()
    write_in_place(path, conf(caches, {"c1", "c2", "c3"}, watch="off"))
    t.check(next_outcome(px, since) and px.wait_log(r"watch_config: no longer following", since=since),
            "a reload with watch_config = off stops following the file")
    since = px.log_size()
    write_in_place(path, conf(caches, {"c1"}, watch="off"))
    time.sleep(0.8)
    t.check(outcomes(px, since) == [], "... then a change does not reload")
    r = px.reload()
    t.check(r and re.match(r"reload \d+: -c2 -c3", r), f"... SIGHUP still does ({r})")
    px.stop()


def configmap(caches):
    """The layout kubelet writes for a ConfigMap volume, and its update:
    a new timestamped directory, ..data swapped to it by a rename."""
    m = H.tmp_path("configmap")
    os.mkdir(m)

    def version(n, text):
        d = os.path.join(m, f"..2026_11_30_12_00_0{n}.{n}")
        os.mkdir(d)
        with open(os.path.join(d, "ringproxy.ini"), "w") as f:
            f.write(text)
        return os.path.basename(d)

    first = version(1, conf(caches, {"c1", "c2"}))
    os.symlink(first, os.path.join(m, "..data"))
    os.symlink("..data/ringproxy.ini", os.path.join(m, "ringproxy.ini"))
    px = H.Proxy(RP, tag="configmap", path=os.path.join(m, "ringproxy.ini"))
    old = first
    for n, names, want in ((2, {"c1", "c2", "c3"}, "reload 2: +c3"), (3, {"c1", "c3"}, "reload 3: -c2")):
        since = px.log_size()
        new = version(n, conf(caches, names))
        os.symlink(new, os.path.join(m, "..data_tmp"))
        os.rename(os.path.join(m, "..data_tmp"), os.path.join(m, "..data"))
        shutil.rmtree(os.path.join(m, old))
        old = new
        r = next_outcome(px, since)
        time.sleep(0.5)
        t.check(r and r.startswith(want) and len(outcomes(px, since)) == 1,
                f"ConfigMap update {n - 1} (..data swapped): one reload ({r})")
    px.stop()


def symlinked(caches):
    """The config's path is a link to a file elsewhere, written in place."""
    real = H.tmp_path("real-dir")
    links = H.tmp_path("link-dir")
    os.mkdir(real)
    os.mkdir(links)
    target = os.path.join(real, "prod.ini")
    write_in_place(target, conf(caches, {"c1", "c2"}))
    os.symlink(target, os.path.join(links, "ringproxy.ini"))
    px = H.Proxy(RP, tag="symlinked", path=os.path.join(links, "ringproxy.ini"))
    since = px.log_size()
    write_in_place(target, conf(caches, {"c1", "c2", "c3"}))
    r = next_outcome(px, since)
    t.check(r and r.startswith("reload 2: +c3"), f"a symlinked file written in place: reloaded ({r})")
    px.stop()


def main():
    caches = [H.Cache(TC, f"c{i}") for i in (1, 2, 3)]
    plain_file(caches)
    configmap(caches)
    symlinked(caches)


H.run_main(t, main)
