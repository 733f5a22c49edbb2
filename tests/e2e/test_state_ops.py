#!/usr/bin/env python3
"""test_state_ops.py -- the runtime state file as a new operator meets it:

  - `ringproxy ctl` exits 3 and says the change "holds until a restart"
    when the state file could not be written (its directory is missing);
  - the start logs what the state file set ("state_file PATH: c1 maint,
    c2 weight 2") or that it was missing; deleting the file while a
    backend is not ready at its file weight is warned about;
  - -t refuses a state file whose directory is missing, or not writable by
    the user running it; the shipped unit has StateDirectory=ringproxy and
    the example config keeps its state_file there.
usage: test_state_ops.py RINGPROXY TESTCACHE"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
t = H.Tap()


def run(*args, wrap=()):
    r = subprocess.run([*wrap, RP, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def start(caches, state_file, tag):
    """A proxy whose admin port is fixed once known, and a config for ctl."""
    px = H.Proxy(RP, H.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0", "state_file": state_file}), tag)
    cli = H.write(f"{tag}.cli.ini", H.conf_text(caches, proxy={"admin_listen": f"127.0.0.1:{px.admin_port()}",
                                                               "state_file": state_file}))
    return px, cli


def test_unsaved(caches):
    state_file = os.path.join(H.tmp_path("no-such-dir"), "state")
    px, cli = start(caches, state_file, "unsaved")
    t.check(re.search(r"warn: .*state_file: the directory \S+ does not exist", px.log()),
            "a state file in a missing directory: the start warns", px.log()[-800:])
    rc, out, err = run("ctl", "-c", cli, "maint", "c1")
    t.check(rc == 3 and "holds until a restart" in err and '"admin_state": "maint"' in out,
            f"ctl maint with the state file unwritable: exit {rc}, the change made, and it says it holds "
            "until a restart", err)
    rc, out, err = run("ctl", "-c", cli, "ready", "c1")
    t.check(rc == 3, "... every change so", err)
    t.check(px.stop() == 0, "SIGTERM: exit 0")


def test_logged(caches):
    d = H.tmp_path("statedir")
    os.makedirs(d, exist_ok=True)
    state_file = os.path.join(d, "state")
    px, cli = start(caches, state_file, "logged")
    t.check(f"info: state_file {state_file}: missing; every backend starts ready" in px.log(),
            "the start says the state file was missing", px.log()[-800:])
    rc1, _, e1 = run("ctl", "-c", cli, "maint", "c1")
    rc2, _, e2 = run("ctl", "-c", cli, "weight", "c2", "2")
    t.check(rc1 == 0 and rc2 == 0 and os.path.exists(state_file), "ctl maint c1, weight c2 2: saved (exit 0)",
            [e1, e2])
    t.check(px.stop() == 0, "SIGTERM: exit 0")
    px, cli = start(caches, state_file, "logged2")
    t.check(f"info: state_file {state_file}: c1 maint, c2 weight 2" in px.log(),
            "the restart says what the state file set", px.log()[-800:])
    mark = px.log_size()
    os.unlink(state_file)
    m = px.wait_log(r"warn: state_file (\S+): gone while c1 maint, c2 weight 2; a restart now would start "
                    r"every backend ready", timeout=5, since=mark)
    t.check(m and m.group(1) == state_file, "deleting the state file while c1 is in maint is warned about",
            px.log()[-800:])
    H.wait_until(lambda: False, 1.5)
    t.check(px.log()[mark:].count("gone while") == 1, "... once")
    rc, _, err = run("ctl", "-c", cli, "ready", "c1")
    t.check(rc == 0 and os.path.exists(state_file), "the next change writes it again", err)
    t.check(px.stop() == 0, "SIGTERM: exit 0")


def test_check(caches):
    missing = H.write("t-missing.ini", H.conf_text(caches, proxy={
        "state_file": os.path.join(H.tmp_path("nowhere"), "state")}))
    rc, out, err = run("-t", "-c", missing)
    t.check(rc == 1 and re.search(r"t-missing\.ini:\d+: state_file: the directory \S+nowhere does not exist",
                                  err), f"-t: a state file in a missing directory is an error (exit {rc})", err)
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        t.skip("-t as another user", "needs root and setpriv")
    else:
        # a directory everyone may read, the state's own directory root's
        d = H.tmp_path("shared")
        os.makedirs(os.path.join(d, "state"), exist_ok=True)
        os.chmod(H.tmp_path(""), 0o755)
        os.chmod(d, 0o755)
        os.chmod(os.path.join(d, "state"), 0o755)
        path = os.path.join(d, "t-ro.ini")
        with open(path, "w") as f:
            f.write(H.conf_text(caches, proxy={"state_file": os.path.join(d, "state", "file")}))
        os.chmod(path, 0o644)
        rc, out, err = run("-t", "-c", path, wrap=(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"))
        t.check(rc == 1 and "state_file: the directory" in err and "is not writable by this user" in err,
                f"-t as a user who cannot write the state file's directory: an error (exit {rc})", err)
        os.chmod(os.path.join(d, "state"), 0o777)
        rc, out, err = run("-t", "-c", path, wrap=(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"))
        t.check(rc == 0, f"... and once it may, -t passes (exit {rc})", err)
    with open(os.path.join(ROOT, "systemd", "ringproxy.service.in")) as f:
        unit = f.read()
    t.check(re.search(r"^StateDirectory=ringproxy$", unit, re.M), "the unit has StateDirectory=ringproxy")
    with open(os.path.join(ROOT, "conf", "ringproxy.ini")) as f:
        ini = f.read()
    t.check(re.search(r"^state_file = /var/lib/ringproxy/", ini, re.M),
            "the example config's state_file is in /var/lib/ringproxy (the unit's StateDirectory)")


def main():
    caches = [H.Cache(TC, n) for n in ("c1", "c2", "c3")]
    test_check(caches)
    test_unsaved(caches)
    test_logged(caches)
    for c in caches:
        c.stop()


H.run_main(t, main)
