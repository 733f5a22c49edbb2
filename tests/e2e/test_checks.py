#!/usr/bin/env python3
"""test_checks.py -- what `ringproxy -t` and the start catch, tried as an
operator would: each mistake gets a clear message, as FILE:LINE where a
line applies, at -t and at start; what depends on the host or the moment
(a name that does not resolve, an address in use, a privileged port) is a
warning at -t and, where the start would misbehave, an error at start. An
address in use names its holder (program and pid); --share-listen shares
with a ringproxy only.
usage: test_checks.py RINGPROXY TESTCACHE"""

import os
import re
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()


def run(*args, wrap=(), timeout=30):
    """ringproxy ARGS to its end: (exit status, stdout, stderr)."""
    p = subprocess.run([*wrap, RP, *args], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def start_fails(path, *extra, wrap=()):
    """Start ringproxy on path, expecting it to refuse: (status, stderr);
    status None when it ran (it is then stopped)."""
    p = subprocess.Popen([*wrap, RP, "-c", path, *extra], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    H._procs.append(p)
    try:
        _, err = p.communicate(timeout=15)
        return p.returncode, err
    except subprocess.TimeoutExpired:
        H.stop_pid(p)
        return None, p.stderr.read() if p.stderr else ""



def main():
    cache = H.Cache(TC, "c1")

    # ---- checks of the file: errors at -t and at start ------------------
    cases = [
        ("admin_listen equal to listen",
         "[proxy]\nlisten = 127.0.0.1:{p}\nadmin_listen = 127.0.0.1:{p}\n",
         r":3: admin_listen 127\.0\.0\.1:\d+ is the address of listen 127\.0\.0\.1:\d+ \(line 2\); "
         r"give the admin listener a port of its own"),
        ("admin_listen on the wildcard of listen's port",
         "[proxy]\nlisten = 127.0.0.1:{p}\nadmin_listen = 0.0.0.0:{p}\n",
         r":3: admin_listen 0\.0\.0\.0:\d+ is the address of listen"),
        ("a second [proxy] section",
         "[proxy]\nlisten = 127.0.0.1:{p}\n[ring]\nvnodes = 10\n[proxy]\nworkers = 1\n",
         r":5: second \[proxy\] section \(the first is at line 1\); merge them into one"),
        ("a second [ring] section",
         "[ring]\nvnodes = 10\n[proxy]\nlisten = 127.0.0.1:{p}\n[ring]\nkey = path\n",
         r":5: second \[ring\] section \(the first is at line 1\); merge them into one"),
        ("an unknown section name, with the near one",
         "[proxy]\nlisten = 127.0.0.1:{p}\n[helth]\npath = /h\n",
         r":3: unknown section \[helth\]; did you mean \[health\]\?"),
        ("an unknown backend section, with the near one",
         "[proxy]\nlisten = 127.0.0.1:{p}\n[backends c9]\nurl = http://127.0.0.1:1\n",
         r":3: unknown section \[backends c9\]; did you mean \[backend c9\]\?"),
        ("an IPv6 backend address without brackets",
         "[proxy]\nlisten = 127.0.0.1:{p}\n[backend v6]\nurl = http://::1:80\n",
         r":4: url: put an IPv6 address in brackets: http://\[::1\]:80"),
    ]
    for what, head, want in cases:
        path = H.write(f"bad-{len(what)}.ini", head.format(p=H.free_port()) +
                       f"[backend c1]\nurl = http://127.0.0.1:{cache.port}\n")
        rc, out, err = run("-t", "-c", path)
        t.check(rc == 1 and re.search(re.escape(path) + want, err), f"-t: {what}", err)
        rc, err = start_fails(path)
        t.check(rc == 1 and re.search(re.escape(path) + want, err) and "nothing started" in err,
                f"start: {what}", err)

    # ---- log_file in a directory that does not exist ---------------------
    missing = H.tmp_path("no-such-dir")
    path = H.write("logdir.ini", f"[proxy]\nlisten = 127.0.0.1:0\nworkers = 1\nlog_file = {missing}/rp.log\n"
                   f"[backend c1]\nurl = http://127.0.0.1:{cache.port}\n")
    want = (re.escape(path) + r":4: log_file: the directory " + re.escape(missing) +
            r" does not exist; create it \(under systemd, LogsDirectory=ringproxy")
    rc, out, err = run("-t", "-c", path)
    t.check(rc == 1 and re.search(want, err), "-t: log_file in a directory that does not exist", err)
    rc, err = start_fails(path)
    t.check(rc == 1 and re.search(want, err), "start: log_file in a directory that does not exist", err)

    # ---- a name that does not resolve: a warning at -t, not an error -----
    path = H.write("unresolved.ini", f"[proxy]\nlisten = 127.0.0.1:0\nworkers = 1\n"
                   f"[backend c1]\nurl = http://127.0.0.1:{cache.port}\n"
                   f"[backend gone]\nurl = http://cache-gone.invalid:6081\n")
    want = (r"warning: " + re.escape(path) + r":7: backend gone: cannot resolve 'cache-gone\.invalid': "
            r"[^;]+; it starts down and its name is resolved again every 2s")
    rc, out, err = run("-t", "-c", path)
    t.check(rc == 0 and re.search(want, err) and "configuration ok (1 warning)" in out,
            "-t: a backend name that does not resolve is a warning, exit 0", out + err)
    rc, out, err = run("-t", "--probe", "-c", path)
    t.check(rc == 1 and re.search(want, err) and "failed its probe" in out,
            "-t --probe: the same name fails the probe, exit 1", out + err)

    # ---- a second ringproxy on the same address --------------------------
    first = H.Proxy(RP, H.conf_text([cache], proxy={"workers": 1}), tag="first")
    path = H.write("second.ini", H.conf_text([cache], proxy={"listen": f"127.0.0.1:{first.port}",
                                                            "workers": 1}))
    holder = rf"ringproxy \(pid {first.proc.pid}\), a ringproxy, listens there"
    rc, out, err = run("-t", "-c", path)
    t.check(rc == 0 and re.search(r"warning: " + re.escape(path) + r":2: listen 127\.0\.0\.1:\d+: " + holder +
                                  r" \(the running one, when this checks a reload\)", err),
            "-t: an address in use is a warning naming the ringproxy there (systemd runs -t before each reload)",
            out + err)
    rc, err = start_fails(path)
    t.check(rc == 1 and re.search(re.escape(path) + r":2: listen 127\.0\.0\.1:\d+: " + holder +
                                  r"; stop it, or start with --share-listen", err),
            "start: a second ringproxy on the same address is refused, naming the first by pid", err)
    st, _, body = H.get(first.port, "/still/first.jpg")
    t.check(st == 200 and first.alive(), "the first keeps serving")
    second = H.Proxy(RP, tag="second", path=path, extra_args=["--share-listen"])
    t.check(second.alive() and second.port == first.port,
            "--share-listen starts a second one on the same address (a binary upgrade)")
    second.stop()

    # ---- another program on the address: named, never shared -----------
    other = H.write("beside-cache.ini", H.conf_text([cache], proxy={"listen": f"127.0.0.1:{cache.port}",
                                                                   "workers": 1}))
    named = rf":2: listen 127\.0\.0\.1:{cache.port}: testcache \(pid {cache.proc.pid}\) listens there, not a ringproxy"
    rc, out, err = run("-t", "-c", other)
    t.check(rc == 0 and re.search(re.escape(other) + named + r"; stop it or listen elsewhere \(a start would "
                                  r"be refused\)", err) and "--share-listen" not in err,
            "-t: a test cache on the address is named (program and pid), no --share-listen suggested", err)
    rc, err = start_fails(other)
    t.check(rc == 1 and re.search(re.escape(other) + named, err) and "--share-listen" not in err,
            "start: refused, naming the test cache, without suggesting --share-listen", err)
    rc, err = start_fails(other, "--share-listen")
    t.check(rc == 1 and re.search(re.escape(other) + named + r".*shares an address with a ringproxy only", err),
            "start --share-listen beside a test cache (it set SO_REUSEPORT too): refused, not bound beside it", err)
    st, _, body = H.get(cache.port, "/still/cache.jpg")
    t.check(st == 200, "the test cache keeps its address to itself", st)

    # admin_listen in use (by the first proxy's listener): refused too
    path = H.write("admin-inuse.ini", H.conf_text([cache], proxy={
        "workers": 1, "admin_listen": f"127.0.0.1:{first.port}"}))
    rc, err = start_fails(path)
    t.check(rc == 1 and re.search(re.escape(path) + r":4: admin_listen 127\.0\.0\.1:\d+: " + holder, err),
            "start: an admin_listen in use is refused, naming who holds it", err)
    first.stop()

    # ---- a port below 1024 without CAP_NET_BIND_SERVICE -----------------
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        unpriv = int(f.read())
    low = 81
    wrap = ()
    if os.getuid() == 0:
        wrap = ("setpriv", "--bounding-set", "-net_bind_service")
    if unpriv <= low:
        t.skip("a port below 1024 needs the capability", f"ip_unprivileged_port_start is {unpriv}")
    elif wrap and subprocess.run(["setpriv", "--version"], capture_output=True).returncode != 0:
        t.skip("a port below 1024 needs the capability", "root, and no setpriv to drop the capability")
    else:
        path = H.write("lowport.ini", f"[proxy]\nlisten = 127.0.0.1:{low}\nworkers = 1\n"
                       f"[backend c1]\nurl = http://127.0.0.1:{cache.port}\n")
        want = (re.escape(path) + r":2: listen 127\.0\.0\.1:81: a port below \d+ needs CAP_NET_BIND_SERVICE, "
                r"which this process lacks")
        rc, out, err = run("-t", "-c", path, wrap=wrap)
        t.check(rc == 0 and re.search("warning: " + want, err),
                "-t: a low port without CAP_NET_BIND_SERVICE is a warning (the service may have it)", err)
        rc, err = start_fails(path, wrap=wrap)
        t.check(rc == 1 and re.search(want, err), "start: a low port without CAP_NET_BIND_SERVICE says so",
                err)

    includes(cache)
    pid_files(cache)


def includes(cache):
    """include = conf.d/*.ini: files in name order, relative to the
    including file, errors as FILE:LINE of the included file, a loop and a
    missing directory refused."""
    top = H.tmp_path("inc")
    os.makedirs(os.path.join(top, "conf.d"), exist_ok=True)

    def put(rel, text):
        with open(os.path.join(top, rel), "w") as f:
            f.write(text)
        return os.path.join(top, rel)

    main_ini = put("main.ini", "[proxy]\nlisten = 127.0.0.1:0\ninclude = conf.d/*.ini\nworkers = 1\n")
    put("conf.d/20-b.ini", f"[backend b]\nurl = http://127.0.0.1:{cache.port}\n")
    put("conf.d/10-a.ini", f"[backend a]\nurl = http://127.0.0.1:{cache.port}\nweight = 2\n")
    put("conf.d/notes.txt", "not a config\n")
    rc, out, err = run("-T", "-c", main_ini)
    sections = re.findall(r"(?m)^\[backend (\w+)\]", out)
    t.check(rc == 0 and sections == ["a", "b"] and re.search(r"(?m)^workers = 1$", out) and
            re.search(r"\[backend a\]\nurl = [^\n]*\nweight = 2\n", out),
            "include = conf.d/*.ini: the .ini files in name order, the including [proxy] goes on after",
            out + err)
    bad = put("conf.d/30-c.ini", "[backend c]\nurl = http://127.0.0.1:1\nweight = x\n")
    rc, out, err = run("-t", "-c", main_ini)
    t.check(rc == 1 and f"{bad}:3: weight: 'x' is not a number" in err,
            "an error in an included file is FILE:LINE of that file", err)
    os.unlink(bad)
    loop = put("conf.d/40-loop.ini", "include = ../main.ini\n")
    rc, out, err = run("-t", "-c", main_ini)
    t.check(rc == 1 and f"{loop}:1: include = ../main.ini: " in err and "an include loop" in err,
            "an include loop is refused at the include's line", err)
    os.unlink(loop)
    put("conf.d/40-dup.ini", "[backend a]\nurl = http://127.0.0.1:1\n")
    rc, out, err = run("-t", "-c", main_ini)
    t.check(rc == 1 and f"duplicate backend 'a' (first defined at {top}/conf.d/10-a.ini:1)" in err,
            "a backend defined in two included files: the first one's FILE:LINE", err)
    os.unlink(os.path.join(top, "conf.d/40-dup.ini"))
    nodir = put("nodir.ini", "[proxy]\nlisten = 127.0.0.1:0\ninclude = missing.d/*.ini\n"
                f"[backend a]\nurl = http://127.0.0.1:{cache.port}\n")
    rc, out, err = run("-t", "-c", nodir)
    t.check(rc == 1 and f"{nodir}:3: include = missing.d/*.ini: no directory {top}/missing.d" in err,
            "include of a missing directory is refused, naming it", err)
    rc, err = start_fails(nodir)
    t.check(rc == 1 and "no directory" in err, "start: the same refusal", err)
    # a glob whose first file has a long line (the line buffer grows and
    # moves) and whose next match is refused: the refusal quotes the
    # include's own text, not the bytes of a buffer since freed (the
    # config fuzzer found it; ASan reads the freed bytes)
    self_ini = put("self.ini", "[proxy]\nlisten = 127.0.0.1:0\ninclude = *.ini\n"
                   f"[backend a]\nurl = http://127.0.0.1:{cache.port}\n")
    put("a-long.ini", "; " + "x" * 6000 + "\n")
    rc, out, err = run("-t", "-c", self_ini)
    t.check(rc == 1 and f"{self_ini}:3: include = *.ini: {top}/self.ini is already being read" in err
            and "AddressSanitizer" not in err,
            "a glob that matches its own file after a long-lined one: the loop refused, quoting the include", err)
    os.unlink(os.path.join(top, "a-long.ini"))
    not_files(cache, top, put, main_ini)


def not_files(cache, top, put, main_ini):
    """What a glob matches that is not a config file: a FIFO (whose open
    would wait for a writer for good), a link to /dev/zero (endless), a
    directory: each refused at the include's line, at -t and at a reload,
    which keeps the running config; the proxy goes on answering, and
    stops on SIGTERM."""
    fifo = os.path.join(top, "conf.d/50-fifo.ini")
    os.mkfifo(fifo)
    try:
        rc, out, err = run("-t", "-c", main_ini, timeout=20)
    except subprocess.TimeoutExpired:
        rc, err = None, "-t did not end within 20 s"
    t.check(rc == 1 and f"{main_ini}:3: include = conf.d/*.ini: {fifo}: is a FIFO, not a regular file" in err,
            "-t with a FIFO in conf.d/: refused at the include's line, without waiting for a writer", err)
    os.unlink(fifo)
    zero = os.path.join(top, "conf.d/50-zero.ini")
    os.symlink("/dev/zero", zero)
    try:
        rc, out, err = run("-t", "-c", main_ini, timeout=20)
    except subprocess.TimeoutExpired:
        rc, err = None, "-t did not end within 20 s"
    t.check(rc == 1 and f"include = conf.d/*.ini: {zero}: is a character device, not a regular file" in err,
            "-t with a link to /dev/zero in conf.d/: refused, not read without end", err)
    os.unlink(zero)
    d = os.path.join(top, "conf.d/50-dir.ini")
    os.mkdir(d)
    rc, out, err = run("-t", "-c", main_ini)
    t.check(rc == 1 and f"include = conf.d/*.ini: {d}: is a directory, not a regular file" in err,
            "a directory that the glob matches: refused, not read as an empty file", err)
    os.rmdir(d)

    proxy = H.Proxy(RP, path=main_ini, tag="fifo")
    os.mkfifo(fifo)
    try:
        outcome = proxy.reload(timeout=15)
        t.check(outcome and outcome.startswith("reload failed") and "is a FIFO" in proxy.log(),
                "SIGHUP with a FIFO in conf.d/: the reload is refused, naming it", outcome)
        st, _, _ = proxy.get("/after-fifo")
        t.check(st == 200, "... and the proxy goes on answering on the config it had", st)
        t.check(proxy.stop(timeout=15) == 0, "... and stops on SIGTERM")
    finally:
        os.unlink(fifo)



def pid_files(cache):
    """[proxy] pid_file and --pid-file: written once listening, removed at
    exit, a stale one replaced, a live one refused."""
    pidf = H.tmp_path("rp.pid")
    other = H.tmp_path("other.pid")
    text = (f"[proxy]\nlisten = 127.0.0.1:0\nworkers = 1\npid_file = {pidf}\n"
            f"[backend c1]\nurl = http://127.0.0.1:{cache.port}\n")
    p = H.Proxy(RP, text)
    got = H.wait_until(lambda: os.path.exists(pidf), 5) and open(pidf).read()
    with socket.create_connection(("127.0.0.1", p.port), timeout=5):
        pass
    t.check(got == f"{p.pid}\n", "pid_file: the proxy's pid once it listens", repr(got))
    rc, err = start_fails(H.write("pid2.ini", text))
    t.check(rc == 1 and f"pid_file {pidf}: ringproxy (pid {p.pid}) is running with it" in err and
            open(pidf).read() == f"{p.pid}\n", "a second proxy on a live pid_file is refused; the file stays",
            err)
    t.check(p.stop() == 0 and not os.path.exists(pidf), "SIGTERM: exit 0, the pid file removed")
    with open(pidf, "w") as f:
        f.write(f"{os.getpid()}\n")            # a live process that is no ringproxy: a reused pid
    p = H.Proxy(RP, text)
    got = H.wait_until(lambda: open(pidf).read() == f"{p.pid}\n", 5)
    t.check(got, "a stale pid_file (its pid now another program's) is replaced", open(pidf).read())
    t.check(p.stop() == 0 and not os.path.exists(pidf), "removed at exit")
    p = H.Proxy(RP, text, extra_args=("--pid-file", other))
    got = H.wait_until(lambda: os.path.exists(other), 5) and open(other).read()
    t.check(got == f"{p.pid}\n" and not os.path.exists(pidf), "--pid-file FILE is used instead of pid_file",
            repr(got))
    t.check(p.stop() == 0 and not os.path.exists(other), "--pid-file: removed at exit")
    old_p = H.Proxy(RP, text)
    new_p = H.Proxy(RP, text, extra_args=("--share-listen",))
    got = H.wait_until(lambda: open(pidf).read() == f"{new_p.pid}\n", 5)
    t.check(got and old_p.stop() == 0 and open(pidf).read() == f"{new_p.pid}\n",
            "a binary upgrade (--share-listen): the new process takes the pid file over, the old one "
            "leaves it at exit", open(pidf).read() if os.path.exists(pidf) else "(no file)")
    t.check(new_p.stop() == 0 and not os.path.exists(pidf), "the new one removes it at its exit")


H.run_main(t, main)
