"""dns.py -- a real DNS server for the discovery tests: Debian's unbound on
127.0.0.1 (a port the kernel gave), serving the zone cluster.local. from
local-data, changed live with unbound-control over a unix socket (no
certificates). Run as a child process and stopped by its PID. Standard
library only."""

import os
import shutil
import signal
import subprocess
import time

from proc import _procs, free_port, stop_pid, tmp_path

ZONE = "cluster.local."


def have_unbound():
    """Whether unbound and unbound-control are installed."""
    return all(shutil.which(x) or os.path.exists("/usr/sbin/" + x) for x in ("unbound", "unbound-control"))


def _exe(name):
    return shutil.which(name) or "/usr/sbin/" + name


class Unbound:
    """unbound -d on 127.0.0.1:PORT with records (a list of RR lines,
    "NAME TTL IN TYPE DATA") in a static local zone: names outside
    them are NXDOMAIN."""

    def __init__(self, records=(), zone=ZONE):
        self.dir = tmp_path(f"unbound.{time.monotonic_ns()}")
        os.makedirs(self.dir)
        self.conf = os.path.join(self.dir, "unbound.conf")
        self.zone = zone
        for attempt in range(5):
            self.port = free_port()
            self._write(records)
            self.proc = subprocess.Popen([_exe("unbound"), "-d", "-c", self.conf], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=open(self.conf + ".log", "ab"))
            _procs.append(self.proc)
            if self._ready():
                return
            stop_pid(self.proc)
        raise RuntimeError("unbound did not start: " + open(self.conf + ".log").read())

    def _write(self, records):
        lines = [
            "server:",
            "    interface: 127.0.0.1",
            f"    port: {self.port}",
            "    do-daemonize: no",
            '    username: ""',
            '    chroot: ""',
            f'    directory: "{self.dir}"',
            '    pidfile: ""',
            "    use-syslog: no",
            "    logfile: \"\"",
            "    do-ip6: no",
            "    verbosity: 0",
            "    num-threads: 1",
            "    so-reuseport: no",
            "    access-control: 127.0.0.0/8 allow",
            f'    local-zone: "{self.zone}" static',
        ]
        lines += [f'    local-data: "{r}"' for r in records]
        lines += ["remote-control:", "    control-enable: yes",
                  f"    control-interface: {os.path.join(self.dir, 'ctl.sock')}"]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _ready(self, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if os.path.exists(os.path.join(self.dir, "ctl.sock")) and self.control("status").returncode == 0:
                return True
            time.sleep(0.05)
        return False

    def control(self, *args, stdin=None):
        """unbound-control ARGS; the CompletedProcess."""
        return subprocess.run([_exe("unbound-control"), "-c", self.conf, *args], input=stdin,
                              capture_output=True, text=True, timeout=20)

    def add(self, *records):
        """Add RR lines (several of one name and type form one RRset)."""
        r = self.control("local_datas", stdin="".join(x + "\n" for x in records))
        if r.returncode != 0:
            raise RuntimeError("local_datas: " + r.stdout + r.stderr)

    def remove(self, *names):
        """Remove every record of each name."""
        r = self.control("local_datas_remove", stdin="".join(n + "\n" for n in names))
        if r.returncode != 0:
            raise RuntimeError("local_datas_remove: " + r.stdout + r.stderr)

    def set_srv(self, name, targets, ttl=1):
        """name's SRV RRset made exactly targets [(target, port)] (none:
        the name removed, NXDOMAIN)."""
        self.remove(name)
        if targets:
            self.add(*[f"{name} {ttl} IN SRV 0 10 {port} {target}" for target, port in targets])

    def freeze(self):
        """kill -STOP: queries go unanswered (timeouts)."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self):
        self.thaw()
        return stop_pid(self.proc)
