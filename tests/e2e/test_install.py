#!/usr/bin/env python3
"""test_install.py -- what `meson install` leaves, and how the daemon logs
under systemd. Installing twice into a DESTDIR never overwrites the
operator's /etc/ringproxy/ringproxy.ini (the example goes beside it);
binary, unit, man pages and README are where the README says; the unit
has LogsDirectory=. When stderr is the journal's stream (JOURNAL_STREAM
names its device and inode), every line carries its priority as
sd-daemon writes it; on any other stderr, and in a log_file, lines keep
their time stamps. A build configured without the man pages says at
setup, and in what `meson install` prints, that they will not be
installed. The installed README links only to installed files; a release
build leaves out the tests and benchmarks unless -Dtests=enabled.
usage: test_install.py RINGPROXY SOURCE_ROOT BUILD_ROOT MESON"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, ROOT, BUILD, MESON = (os.path.abspath(a) if i < 3 else a for i, a in enumerate(sys.argv[1:5]))
t = H.Tap()


def install(dest):
    """meson install into dest; (status, output)."""
    p = subprocess.run([MESON, "install", "-C", BUILD, "--destdir", dest, "--no-rebuild"],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def check_install():
    dest = tempfile.mkdtemp(prefix="rp-install-")
    etc = os.path.join(dest, "etc", "ringproxy")
    ini, example = os.path.join(etc, "ringproxy.ini"), os.path.join(etc, "ringproxy.ini.example")
    with open(os.path.join(ROOT, "conf", "ringproxy.ini")) as f:
        shipped = f.read()
    rc, out = install(dest)
    t.check(rc == 0, "meson install --destdir runs", out)
    t.check(os.path.isfile(example) and open(example).read() == shipped,
            "the example config is /etc/ringproxy/ringproxy.ini.example")
    t.check(os.path.isfile(ini) and open(ini).read() == shipped,
            "a first install makes ringproxy.ini from it")
    prefix = subprocess.run([MESON, "introspect", "--buildoptions", BUILD], capture_output=True,
                            text=True).stdout
    m = re.search(r'"name": "prefix", "value": "([^"]+)"', prefix)
    pre = dest + (m.group(1) if m else "/usr/local")
    for rel in ("bin/ringproxy", "lib/systemd/system/ringproxy.service", "share/doc/ringproxy/README.md",
                "share/doc/ringproxy/benchmarks.md", "share/doc/ringproxy/ramp.svg"):
        t.check(os.path.isfile(os.path.join(pre, rel)), f"installed {rel}")
    # every file the installed README and benchmarks.md link to is beside them
    doc = os.path.join(pre, "share/doc/ringproxy")
    broken, links = [], 0
    for name in ("README.md", "benchmarks.md"):
        text = open(os.path.join(doc, name)).read() if os.path.isfile(os.path.join(doc, name)) else ""
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:|#", target):
                continue
            links += 1
            if not os.path.isfile(os.path.join(doc, target.split("#")[0])):
                broken.append(f"{name}: {target}")
    t.check(links >= 3 and not broken, f"the installed README's {links} links to files all lead to installed "
            "files (the screenshot, the benchmarks, the cache suite's table)", "\n".join(broken))
    pages = (("ringproxy.8", "man8"), ("ringproxy.ini.5", "man5"), ("ringproxy.7", "man7"),
             ("ringproxy-stats.7", "man7"))
    built_man = [p for p, _ in pages if os.path.exists(os.path.join(BUILD, "src", "man", p))]
    if built_man:
        for page, sec in pages:
            t.check(os.path.isfile(os.path.join(pre, "share", "man", sec, page)), f"installed man page {page}")
    else:
        t.skip("man pages installed", "not built here (no scdoc; -Dman=enabled requires it)")
    unit = open(os.path.join(pre, "lib/systemd/system/ringproxy.service")).read()
    t.check(re.search(r"^LogsDirectory=ringproxy$", unit, re.M), "the unit has LogsDirectory=ringproxy")

    # the operator edits the file; installing again keeps it
    mine = shipped + "\n[backend mine]\nurl = http://10.9.9.9:6081\n"
    with open(ini, "w") as f:
        f.write(mine)
    with open(example, "w") as f:
        f.write("; an old example\n")
    rc, out = install(dest)
    t.check(rc == 0 and open(ini).read() == mine, "a second install keeps the operator's ringproxy.ini", out)
    t.check(open(example).read() == shipped, "... and updates the example beside it")
    # a config kept elsewhere and linked in is kept too, link and all
    os.rename(ini, ini + ".real")
    os.symlink("ringproxy.ini.real", ini)
    rc, out = install(dest)
    t.check(rc == 0 and os.path.islink(ini) and open(ini).read() == mine, "a symlinked ringproxy.ini is kept")
    shutil.rmtree(dest, ignore_errors=True)


def check_journal():
    # a backend that does not resolve gives a warning line
    text = ("[proxy]\nlisten = 127.0.0.1:0\nworkers = 1\n"
            "[backend a]\nurl = http://127.0.0.1:9\n[backend b]\nurl = http://cache-b.invalid:9\n")
    err_path = H.tmp_path("journal.stderr")
    open(err_path, "w").close()
    st = os.stat(err_path)
    px = H.Proxy(RP, text, tag="journal", env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"},
                 stderr_path=err_path)
    px.stop()
    log = px.log()
    lines = [l for l in log.splitlines() if l]
    t.check(lines and all(re.match(r"<[3467]>(error|warn|info|debug): ", l) for l in lines),
            "stderr is the journal: every line starts with its priority", log)
    t.check(re.search(r"^<4>warn: .*backend b: cannot resolve", log, re.M) and
            re.search(r"^<6>info: listening on ", log, re.M) and re.search(r"^<6>info: stopped$", log, re.M),
            "warnings are <4>, information <6>", log)
    t.check(not re.search(r"\d{4}-\d\d-\d\dT", log), "no time stamp of our own (the journal keeps one)")

    # not the journal's stream: time stamps, no priority
    px = H.Proxy(RP, text, tag="notjournal", env={"JOURNAL_STREAM": "1:1"})
    px.stop()
    log = px.log()
    t.check(re.search(r"^\d{4}-\d\d-\d\dT[\d:.]+Z info: listening on ", log, re.M) and "<6>" not in log,
            "another stderr with JOURNAL_STREAM set elsewhere: the plain format", log)

    # a log_file under the journal's stderr: the file keeps the plain format
    logdir = H.tmp_path("logs")
    os.mkdir(logdir)
    lf = os.path.join(logdir, "ringproxy.log")
    err_path = H.tmp_path("journal2.stderr")
    open(err_path, "w").close()
    st = os.stat(err_path)
    px = H.Proxy(RP, text.replace("workers = 1\n", f"workers = 1\nlog_file = {lf}\n"), tag="logfile",
                 env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, log_file=lf, stderr_path=err_path)
    px.stop()
    flog = open(lf).read()
    t.check(re.search(r"^\d{4}-\d\d-\d\dT[\d:.]+Z info: listening on ", flog, re.M) and "<6>" not in flog,
            "log_file lines keep time stamps under systemd", flog)


def check_no_man():
    """-Dman=disabled (what a build without scdoc gets too): setup warns,
    the install plan has no page, and install's own output names them."""
    bdir = tempfile.mkdtemp(prefix="rp-noman-")
    p = subprocess.run([MESON, "setup", bdir, ROOT, "-Dman=disabled", "-Dfuzz=disabled"],
                       capture_output=True, text=True, timeout=300)
    said = "ringproxy(8), ringproxy.ini(5), ringproxy(7) and ringproxy-stats(7) will not be installed"
    t.check(p.returncode == 0 and said in p.stdout + p.stderr, "setup without the man pages says so",
            (p.stdout + p.stderr)[-2000:])
    plan = subprocess.run([MESON, "introspect", "--installed", bdir], capture_output=True, text=True,
                          timeout=60).stdout
    # what meson install prints of the man pages' part (tag man), without building
    p = subprocess.run([MESON, "install", "-C", bdir, "--tags", "man", "--dry-run", "--no-rebuild",
                        "--destdir", os.path.join(bdir, "dest")], capture_output=True, text=True, timeout=120)
    t.check("/man" not in plan and said in p.stdout + p.stderr,
            "no man page in the install plan, and meson install prints why", plan + p.stdout + p.stderr)
    shutil.rmtree(bdir, ignore_errors=True)


def check_release_targets():
    """A release build (the README's) builds the daemon and its pages, not
    the tests and benchmarks; -Dtests=enabled builds them, for meson
    test. Read from the build plan, without building."""
    counts = {}
    for opt in ("", "-Dtests=enabled"):
        bdir = tempfile.mkdtemp(prefix="rp-release-")
        p = subprocess.run([MESON, "setup", bdir, ROOT, "-Dbuildtype=release", "-Dfuzz=disabled",
                            *([opt] if opt else [])], capture_output=True, text=True, timeout=300)
        q = subprocess.run([MESON, "introspect", "--targets", bdir], capture_output=True, text=True, timeout=60)
        names = re.findall(r'"name": "([^"]+)"', q.stdout)
        tests = subprocess.run([MESON, "introspect", "--tests", bdir], capture_output=True, text=True, timeout=60)
        counts[opt] = (p.returncode, names, tests.stdout.count('"name"'), p.stdout)
        shutil.rmtree(bdir, ignore_errors=True)
    rc, names, ntests, out = counts[""]
    t.check(rc == 0 and "ringproxy" in names and "testcache" not in names and ntests == 0 and
            not any(n.startswith(("test-", "bench-", "fuzz-")) for n in names) and "-Dtests=enabled" in out,
            f"a release build: {len(names)} targets, the daemon's, no test, test cache or benchmark; setup says "
            "how to build them", " ".join(names))
    rc, names, ntests, out = counts["-Dtests=enabled"]
    t.check(rc == 0 and "testcache" in names and "test-ring" in names and "bench-ring" in names and ntests > 50,
            f"-Dtests=enabled: the tests and benchmarks too ({len(names)} targets, {ntests} tests)")


def main():
    check_install()
    check_journal()
    check_no_man()
    check_release_targets()


H.run_main(t, main)
