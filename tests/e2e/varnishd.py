"""varnishd.py -- a real Varnish 7.1 cache for the end-to-end tests:
varnishd -F on 127.0.0.1 with its own working directory and
tests/e2e/varnish.vcl in front of an origin, and its own counters
(varnishstat). Standard library only."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

VARNISHD = shutil.which("varnishd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
VARNISHSTAT = shutil.which("varnishstat", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
VCL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "varnish.vcl")



class Varnish:
    """varnishd -F on 127.0.0.1, its own -n working directory; in a session
    of its own so that stopping its PID's group takes its child too."""

    def __init__(self, name, origin_port):
        self.name = name
        self.workdir = H.tmp_path(f"varnish-{name}")
        os.makedirs(self.workdir, exist_ok=True)
        with open(VCL) as f:
            vcl = (f.read().replace("@ORIGIN_HOST@", "127.0.0.1")
                   .replace("@ORIGIN_PORT@", str(origin_port)).replace("@RINGPROXY@", "127.0.0.1"))
        self.vcl = os.path.join(self.workdir, "thumbs.vcl")
        with open(self.vcl, "w") as f:
            f.write(vcl)
        self.port = None
        self.proc = None

    def start(self):
        """Start it (on the port it had, after the first time); wait until
        /health answers."""
        for _ in range(5):
            port = self.port or H.free_port()
            log = open(os.path.join(self.workdir, "varnishd.log"), "ab")
            self.proc = subprocess.Popen(
                [VARNISHD, "-F", "-n", self.workdir, "-a", f"127.0.0.1:{port}", "-f", self.vcl,
                 "-s", "malloc,32m", "-T", "none", "-j", "none", "-l", "2m",
                 "-p", "thread_pools=1", "-p", "thread_pool_min=5", "-p", "thread_pool_max=100"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
            log.close()
            H._procs.append(self.proc)

            def up():
                try:
                    return H.get(port, "/health", timeout=2)[0] == 200
                except OSError:
                    return False
            if H.wait_until(lambda: up() or self.proc.poll() is not None, 30, step=0.05) and up():
                self.port = port
                return
            self.stop()
        raise RuntimeError(f"varnishd {self.name} did not start: " +
                           open(os.path.join(self.workdir, "varnishd.log")).read()[-2000:])

    def stop(self, sig=signal.SIGTERM):
        """Stop the manager and its child (its process group)."""
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # the child may outlive the manager by a moment: wait for the port
        if self.port:
            H.wait_until(lambda: not self.listening(), 10)

    def listening(self):
        """True while something accepts on its port."""
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def counters(self, *names):
        """{name: value} of its varnishstat counters (MAIN.cache_hit, ...)."""
        p = subprocess.run([VARNISHSTAT, "-n", self.workdir, "-1", "-j"], capture_output=True, text=True,
                           timeout=30)
        doc = json.loads(p.stdout)
        c = doc.get("counters", doc)
        return {n: c[n]["value"] for n in names}
