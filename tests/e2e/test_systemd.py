#!/usr/bin/env python3
"""test_systemd.py -- the unit meson makes from systemd/ringproxy.service.in
is a valid unit and stays hardened: `systemd-analyze verify` passes and the
offline security exposure stays at or below 2.0 ("OK"); it names the binary
and the README under the build's prefix (a build configured with --prefix
/opt/... gets /opt/.../bin/ringproxy, not /usr/local). Skips (exit 77)
without systemd.
usage: test_systemd.py RINGPROXY SOURCE_ROOT UNIT MESON"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

rp, root, built, meson = sys.argv[1:5]
if not shutil.which("systemd-analyze"):
    print("1..0 # SKIP no systemd-analyze")
    sys.exit(0)
tmp = tempfile.mkdtemp(prefix="rp-unit-")
unit = open(built).read() if os.path.exists(built) else ""
prefix = re.search(r"^ExecStart=(\S*)/bin/ringproxy ", unit, re.M)
# point the unit at the binary under test (verify checks ExecStart exists)
if prefix:
    unit = unit.replace(prefix.group(1) + "/bin/ringproxy", os.path.abspath(rp))
path = os.path.join(tmp, "ringproxy.service")
with open(path, "w") as f:
    f.write(unit)
n = 0
bad = 0


def check(cond, what):
    global n, bad
    n += 1
    print(("ok" if cond else "not ok"), n, "-", what)
    bad += not cond


p = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True, timeout=60)
check(p.returncode == 0, "systemd-analyze verify accepts the unit")
if p.returncode:
    print("# " + p.stderr.replace("\n", "\n# "))
p = subprocess.run(["systemd-analyze", "security", "--offline=true", path],
                   capture_output=True, text=True, timeout=60)
m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout + p.stderr)
check(m is not None, "security analysis ran")
check(m is not None and float(m.group(1)) <= 2.0, f"exposure {m.group(1) if m else '?'} <= 2.0")
check("Type=notify" in unit and "ExecReload=" in unit, "the unit uses READY=1 notification and SIGHUP reload")

# another prefix: configuring is enough, meson makes the unit at setup
opt = os.path.join(tmp, "opt-build")
p = subprocess.run([meson, "setup", "--prefix", "/opt/rp-test", "-Dman=disabled", "-Dfuzz=disabled", opt, root],
                   capture_output=True, text=True, timeout=240)
other = os.path.join(opt, "ringproxy.service")
other = open(other).read() if p.returncode == 0 and os.path.exists(other) else ""
execs = re.findall(r"^Exec(?:StartPre|Start|Reload)=(\S+)", other, re.M)
check(p.returncode == 0 and execs.count("/opt/rp-test/bin/ringproxy") == 3 and "/usr/local" not in other and
      "Documentation=file:///opt/rp-test/share/doc/ringproxy/README.md" in other,
      f"with --prefix /opt/rp-test the unit runs /opt/rp-test/bin/ringproxy and names its README: {execs}")
if p.returncode:
    print("# " + (p.stdout + p.stderr)[-2000:].replace("\n", "\n# "))
shutil.rmtree(tmp, ignore_errors=True)
print(f"1..{n}")
sys.exit(1 if bad else 0)
