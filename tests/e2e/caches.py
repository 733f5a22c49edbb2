"""caches.py -- test caches (the testcache binary on a port from the
kernel), the bodies they serve, and ringproxy configs naming them.
Standard library only."""

import http.client
import json
import os
import signal
import subprocess
import time

from proc import _procs, stop_pid, tmp_path

# ---- test caches and configs --------------------------------------------------


def body_for(uri, size=4096):
    """testcache's documented body: (URI + "\\n") repeated, cut to size."""
    pat = (uri + "\n").encode()
    return (pat * (size // len(pat) + 1))[:size]


def fnv1a(data, h=2166136261):
    """32-bit FNV-1a of data (bytes), as testcache's X-Body-FNV1a."""
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


class Cache:
    """One testcache on 127.0.0.1, port chosen by the kernel; extra are
    more testcache arguments."""

    def __init__(self, exe, name, *extra):
        self.exe, self.name, self.extra = exe, name, extra
        self.start()

    def start(self, port=0):
        """Start it (again): port 0 for a free port, or the port it had."""
        pf = tmp_path(f"{self.name}.{time.monotonic_ns()}.port")
        self.proc = subprocess.Popen([self.exe, "--listen", f"127.0.0.1:{port}", "--name", self.name,
                                      "--port-file", pf, *self.extra],
                                     stdout=subprocess.DEVNULL)
        _procs.append(self.proc)
        deadline = time.monotonic() + 20
        while not os.path.exists(pf):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"testcache {self.name} did not start")
            time.sleep(0.01)
        with open(pf) as f:
            self.port = int(f.read())

    def admin(self, path):
        """The body of a GET of one of its /__ admin paths."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path)
            return c.getresponse().read()
        finally:
            c.close()

    def stats(self):
        """/__stats as a dict."""
        return json.loads(self.admin("/__stats"))

    def reset(self):
        """/__reset: counters to zero."""
        self.admin("/__reset")

    def stop(self):
        """SIGTERM; its exit status."""
        return stop_pid(self.proc)

    def kill9(self):
        """SIGKILL: gone without closing anything."""
        return stop_pid(self.proc, signal.SIGKILL)


def conf_text(caches, proxy=None, ring=None, health=None, backend=None, cache=None):
    """A config: [proxy] listening on port 0 with 2 workers, updated by
    proxy's keys; [ring] with ring's keys; [health] with health's if any;
    [cache] with cache's keys, or size = 0 when cache is None: the tests of
    routing, failures and framing are about what reaches the backends, which
    the hot-object cache would answer for them (test_cache.py tests it);
    one [backend NAME] per cache (a Cache, or (name, port)) with the keys
    of backend[NAME] after its url."""
    opts = {"listen": "127.0.0.1:0", "workers": 2}
    opts.update(proxy or {})
    s = "[proxy]\n" + "".join(f"{k} = {v}\n" for k, v in opts.items())
    s += "\n[ring]\n" + "".join(f"{k} = {v}\n" for k, v in (ring or {}).items())
    if health:
        s += "\n[health]\n" + "".join(f"{k} = {v}\n" for k, v in health.items())
    s += "\n[cache]\n" + "".join(f"{k} = {v}\n" for k, v in (cache if cache is not None else {"size": 0}).items())
    for c in caches:
        name, port = (c.name, c.port) if isinstance(c, Cache) else c
        s += f"\n[backend {name}]\nurl = http://127.0.0.1:{port}\n"
        s += "".join(f"{k} = {v}\n" for k, v in (backend or {}).get(name, {}).items())
    return s


def conf_by_name(names, ports, ring=None, **kw):
    """conf_text for the caches names at ports ({name: port}), with bounded
    loads off (exact routing) unless ring says otherwise."""
    return conf_text([(n, ports[n]) for n in names], ring=ring or {"balance_factor": 0}, **kw)
