#!/usr/bin/env python3
"""test_compat.py -- ringproxy's compatible schemes against the real
programs: Debian's nginx (hash $request_uri consistent), haproxy (balance
uri, alone, whole and path-only; hash-type consistent) and nutcracker (ketama, md5 and fnv1a_64), each
configured as an operator would (5 caches, mixed weights; one nginx
server by hostname, one HAProxy server with an explicit id, one
nutcracker server without a name) in front of 5 testcaches (memcached
fakes for nutcracker). Several thousand URLs (with and without queries,
odd bytes, %-escapes, long ones) go through each real proxy, and which
cache each reached is recorded (X-Backend; the value of a get); then
`ringproxy import` reads the same file, ringproxy runs with what it
printed (the address lines aside) in front of the same caches, and every
URL must reach the same cache (for nutcracker, `ringproxy plan --keys
--raw-keys --per-key` must name the same server for every key).
HAProxy's ids, as its stats socket reports them, must be the ids the
import wrote. With COMPAT_VECTORS=DIR the placements of the real programs
are also written to DIR/{nginx,haproxy,nutcracker-md5,nutcracker-fnv1a_64}
-placement.csv with the configs that made them (tests/unit/vectors/ holds
one run's).
usage: test_compat.py RINGPROXY TESTCACHE"""

import http.client
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
SBIN = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
NGINX = shutil.which("nginx", path=SBIN)
HAPROXY = shutil.which("haproxy", path=SBIN)
NUTCRACKER = shutil.which("nutcracker", path=SBIN)
NURLS = 3000
NAMES = ["c1", "c2", "c3", "c4", "c5"]
# weights of the five servers, the same in every proxy's file
WEIGHTS = [3, 1, 2, 1, 5]



def v4_only_name():
    """A host name that resolves to 127.0.0.1 alone: nginx makes a peer of
    every address a name has, and a ::1 peer no testcache listens on would
    send its keys elsewhere."""
    for name in ("localhost", socket.gethostname()):
        try:
            addrs = {a[4][0] for a in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)}
        except OSError:
            continue
        if addrs == {"127.0.0.1"}:
            return name
    raise RuntimeError("no host name resolves to 127.0.0.1 alone (localhost, the host's name)")


# ---- the URLs -----------------------------------------------------------------

# Bytes of a request target: RFC 3986's unreserved, then its sub-delims,
# ':' and '@', and the visible bytes it does not allow but nginx 1.22,
# haproxy 2.6 and ringproxy all take as they are ('"<>\\^`{|}[]'; every
# visible byte but '#', which ends a target). No byte above 0x7e: haproxy
# 2.6 answers 400 to some (UTF-8's "\xc3\xa9" in a path).
PLAIN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
ODD = "!$&'()*+,;=:@\"<>\\^`{|}[]"


def make_urls(n, seed=23):
    """n distinct request targets of a thumbnail tier and its oddities:
    plain paths, queries, %-escapes (upper and lower case), odd bytes,
    '//' and dot segments, long ones; deterministic."""
    rnd = random.Random(seed)
    out, seen = [], set()

    def word(k, alphabet=PLAIN):
        return "".join(rnd.choice(alphabet) for _ in range(k))

    while len(out) < n:
        i = len(out)
        kind = i % 10
        if kind in (0, 1, 2):
            u = f"/thumbs/{rnd.randrange(10**6)}_{rnd.choice([64, 128, 200, 400])}x{rnd.choice([64, 200])}.jpg"
        elif kind in (3, 4):
            u = f"/t/{word(rnd.randrange(1, 12))}.webp?w={rnd.randrange(2000)}&h={rnd.randrange(2000)}"
        elif kind == 5:
            u = "/img/" + "".join(rnd.choice(["%20", "%2F", "%c3%a9", "%E2%82%AC", "%25", "%3f", word(3)])
                                  for _ in range(rnd.randrange(1, 6))) + ".png"
        elif kind == 6:
            u = "/o/" + word(rnd.randrange(1, 8), PLAIN + ODD) + "?" + word(rnd.randrange(0, 10), PLAIN + ODD + "/?")
        elif kind == 7:
            u = rnd.choice(["/a//b/", "/./x/", "/a/../b/", "//", "/x/."]) + word(5)
        elif kind == 8:
            u = f"/q/{i}?" + "&".join(f"{word(2)}={word(3)}" for _ in range(rnd.randrange(1, 5))) + \
                rnd.choice(["", "&", "?", "=="])
        else:
            long_ = i % 100 == 9
            u = "/l/" + word(rnd.randrange(1000, 4000) if long_ else rnd.randrange(20, 200))
            if rnd.random() < 0.5:
                u += "?" + word(rnd.randrange(1, 300))
        if u not in seen:
            seen.add(u)
            out.append(u)
    return out


def fetch(port, urls, deadline_s=120):
    """GET every URL on one keep-alive connection (a new one when the
    proxy closes): {url: the X-Backend that answered, or "status N"}.
    Bounded in count and in time."""
    out = {}
    deadline = time.monotonic() + deadline_s
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for u in urls:
            if time.monotonic() > deadline:
                break
            for attempt in (0, 1):
                try:
                    c.request("GET", u, headers={"Host": "thumbs.example"})
                    r = c.getresponse()
                    r.read()
                    break
                except (http.client.HTTPException, OSError):
                    c.close()   # a connection the proxy closed: once more
                    if attempt:
                        raise
            out[u] = r.getheader("X-Backend") if r.status == 200 else f"status {r.status}"
            if r.will_close:
                c.close()
    finally:
        c.close()
    return out


def counts(placed):
    """'c1 812, c2 301, ...' of a placement."""
    n = {}
    for v in placed.values():
        n[v] = n.get(v, 0) + 1
    return ", ".join(f"{k} {n[k]}" for k in sorted(n))


def answered(tag, placed, keys, what="URLs", by="caches"):
    """Check that every key was answered by one of the five; True if so."""
    ok = len(placed) == len(keys) and all(v in NAMES for v in placed.values())
    t.check(ok, f"{tag}: {len(placed)} of {len(keys)} {what} answered by the 5 {by} ({counts(placed)})",
            "\n".join(f"{k[:120]}: {v}" for k, v in placed.items() if v not in NAMES))
    return ok


def wait_port(port, proc, timeout=30):
    """True once something accepts on port, False if proc exited first."""
    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    return bool(H.wait_until(lambda: up() or proc.poll() is not None, timeout) and up())


def start(args, tag, port):
    """A real proxy in the foreground, its output in a file; waits for its
    port. Registered, so it is stopped by PID at the end."""
    log = open(H.tmp_path(f"{tag}.out"), "ab")
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    H._procs.append(p)
    if not wait_port(port, p):
        H.stop_pid(p)
        with open(H.tmp_path(f"{tag}.out")) as f:
            raise RuntimeError(f"{tag} did not start: {f.read()[-2000:]}")
    return p


def real_placement(tag, args, port, urls, during=None):
    """Run a real proxy (args), send urls through it, stop it: its
    placement, whether all five caches answered it, and what during()
    returned while it ran."""
    p = start(args, tag, port)
    got = during() if during else None
    placed = fetch(port, urls)
    H.stop_pid(p)
    return placed, answered(tag, placed, urls), got


# ---- ringproxy ------------------------------------------------------------------

def imported(fmt, path, *opts):
    """`ringproxy import FMT PATH OPTS`: (exit status, stdout, stderr)."""
    r = subprocess.run([RP, "import", fmt, path, *opts], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def import_ok(tag, fmt, path, more="", want=lambda ini: True):
    """Check that `ringproxy import FMT path` printed scheme = FMT and 5
    backends, and want(ini) (said as more): (exit status, the INI)."""
    rc, ini, err = imported(fmt, path)
    t.check(rc == 0 and f"\nscheme = {fmt} " in ini and ini.count("[backend ") == 5 and want(ini),
            f"{tag}: ringproxy import {fmt} reads it: scheme = {fmt}, 5 backends{more}", err or ini)
    return rc, ini


def local(ini):
    """The imported INI with its listeners on ports from the kernel and
    without the active health check it writes (a check timed out on a
    loaded machine would send a key along the walk, and this test is
    about placement): the only lines the test changes."""
    ini = re.sub(r"(?m)^listen = .*$", "listen = 127.0.0.1:0", ini)
    ini = re.sub(r"(?m)^path = /health$", "path =", ini)
    return re.sub(r"(?m)^admin_listen = .*$", "admin_listen = 127.0.0.1:0", ini)


def through_ringproxy(tag, ini, urls, want):
    """Start ringproxy with ini, send urls, check each reaches the cache
    it reached in want (the real proxy's placement). ini None: the import
    or the real proxy failed, and so do both checks."""
    if ini is None:
        t.check(False, f"{tag}: ringproxy starts with the imported config (not run: nothing to compare)")
        t.check(False, f"{tag}: every URL reaches the cache it reached before (not run: nothing to compare)")
        return
    try:
        p = H.Proxy(RP, local(ini), tag=tag)
    except RuntimeError as e:
        t.check(False, f"{tag}: ringproxy starts with the imported config", str(e)[-3000:])
        t.check(False, f"{tag}: every URL reaches the cache it reached before (not run: no ringproxy)")
        return
    t.check(True, f"{tag}: ringproxy starts with the imported config")
    got = fetch(p.port, urls)
    same = sum(1 for u in urls if got.get(u) == want[u])
    diff = [f"{u[:120]}: {want[u]} before, {got.get(u)} through ringproxy" for u in urls
            if got.get(u) != want[u]]
    t.check(same == len(urls), f"{tag}: {same} of {len(urls)} URLs reach the cache they reached before "
            f"({counts(got)})", "\n".join(diff[:30]))
    p.stop()


# ---- the vectors ----------------------------------------------------------------

def save_vectors(name, exe, conf, command, servers, what, urls, placed):
    """With COMPAT_VECTORS=DIR: DIR/NAME-placement.csv, how it was made,
    the servers in order (what: what of them the placement hashes), then
    INDEX,KEY a line (INDEX the 0-based position of the server that
    answered, KEY the rest of the line exactly as sent)."""
    d = os.environ.get("COMPAT_VECTORS")
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    index = {n: i for i, n in enumerate(NAMES)}
    r = subprocess.run([exe, "-V" if exe == NUTCRACKER else "-v"], capture_output=True, text=True, timeout=30)
    ver = (r.stdout + r.stderr).splitlines()[0]
    with open(os.path.join(d, f"{name}-placement.csv"), "w") as f:
        f.write(f"# Placement by the real {os.path.basename(exe)} ({ver}),\n"
                f"# made by tests/e2e/test_compat.py (COMPAT_VECTORS=DIR) running\n#   {command}\n"
                "# with this config, its servers on loopback ports from the kernel:\n#\n")
        f.write("".join(f"#   {line}\n" for line in conf.replace(H.TMP, "PREFIX").splitlines()))
        f.write(f"#\n# Servers by INDEX, in the order of the config ({what}):\n")
        f.write("".join(f"#   {i}: {s}\n" for i, s in enumerate(servers)))
        f.write("# Each line: INDEX,KEY (the key as sent: the rest of the line).\n")
        f.write("".join(f"{index[placed[u]]},{u}\n" for u in urls))


# ---- nginx ----------------------------------------------------------------------

def nginx_conf(prefix, port, servers):
    """An operator's nginx.conf, private to this run: in the foreground,
    one process, its files under prefix."""
    lines = "".join(f"        server {s};\n" for s in servers)
    return f"""# thumbnail tier, as an operator writes it
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream thumbs {{
        hash $request_uri consistent;
{lines}        keepalive 8;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://thumbs;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream off;
        }}
    }}
}}
"""


def test_nginx(caches, urls, host):
    prefix = H.tmp_path("nginx")
    os.makedirs(prefix, exist_ok=True)
    port = H.free_port()
    # server 2 by host name; weights mixed, weight=1 written out once
    servers = []
    for i, (c, w) in enumerate(zip(caches, WEIGHTS)):
        addr = f"{host}:{c.port}" if i == 1 else f"127.0.0.1:{c.port}"
        servers.append(addr + (f" weight={w}" if w != 1 or i == 3 else ""))
    conf = nginx_conf(prefix, port, servers)
    path = H.write("nginx.conf", conf)
    placed, ok, _ = real_placement("nginx", [NGINX, "-p", prefix, "-e", f"{prefix}/error.log", "-c", path],
                                   port, urls)
    save_vectors("nginx", NGINX, conf, f"{NGINX} -p PREFIX -c nginx.conf",
                 [f"{s.split()[0]} weight {w}" for s, w in zip(servers, WEIGHTS)],
                 "the server string, ports included, is the identity", urls, placed)
    rc, ini = import_ok("nginx", "nginx", path)
    t.check(f"id = {host}:{caches[1].port}\n" in ini,
            "nginx: the server by host name keeps its string as written as its id", ini)
    # the same file with a placement ringproxy does not reproduce
    modulo = H.write("nginx-modulo.conf", conf.replace("hash $request_uri consistent;", "hash $request_uri;"))
    line = conf.splitlines().index("        hash $request_uri consistent;") + 1
    rc2, out2, err2 = imported("nginx", modulo)
    t.check(rc2 == 1 and out2 == "" and err2.startswith(f"{modulo}:{line}: hash without consistent"),
            f"nginx: hash without consistent is refused as FILE:{line}, exit 1, nothing printed",
            f"exit {rc2}\n{out2[:500]}\n{err2}")
    through_ringproxy("nginx", ini if rc == 0 and ok else None, urls, placed)


# ---- haproxy --------------------------------------------------------------------

def haproxy_conf(sock, port, caches, opt=""):
    """An operator's haproxy.cfg: server c2 with an explicit id 4 (so c4
    is numbered 5, skipping it), weights mixed; balance uri with opt
    ("", "whole" or "path-only")."""
    lines = ""
    for i, (c, w) in enumerate(zip(caches, WEIGHTS)):
        extra = (f" weight {w}" if w != 1 else "") + (" id 4" if i == 1 else "")
        lines += f"    server {c.name} 127.0.0.1:{c.port}{extra}\n"
    return f"""# thumbnail tier, as an operator writes it
global
    stats socket {sock} level admin
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend thumbs_front
    bind 127.0.0.1:{port}
    default_backend thumbs
backend thumbs
    balance uri{" " + opt if opt else ""}
    hash-type consistent
{lines}"""


def haproxy_ids(sock):
    """{server name: id} from the stats socket's `show servers state`."""
    # haproxy may accept on its port before the socket file exists
    H.wait_until(lambda: os.path.exists(sock), 10)
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    s.sendall(b"show servers state thumbs\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    ids = {}
    for line in data.decode().splitlines()[2:]:
        col = line.split()
        if len(col) > 3:
            ids[col[3]] = col[2]
    return ids


# balance uri's option -> the [ring] key the import must write for it
HAPROXY_KEYS = {"": "uri", "whole": "uri+query", "path-only": "path"}


def test_haproxy(caches, urls, opt=""):
    tag = "haproxy" + (f" {opt}" if opt else "")
    prefix = H.tmp_path("haproxy")
    os.makedirs(prefix, exist_ok=True)
    # a unix socket's path has 107 bytes at most: "admin", "w", "p"
    sock = f"{prefix}/{opt[:1] or 'admin'}.sock"
    port = H.free_port()
    conf = haproxy_conf(sock, port, caches, opt)
    path = H.write(f"haproxy{opt}.cfg", conf)
    placed, ok, ids = real_placement(tag, [HAPROXY, "-db", "-f", path], port, urls,
                                     lambda: haproxy_ids(sock))
    if not opt:
        save_vectors("haproxy", HAPROXY, conf, f"{HAPROXY} -db -f haproxy.cfg",
                     [f"{c.name} id {ids.get(c.name)} weight {w}" for c, w in zip(caches, WEIGHTS)],
                     "the id, from its stats socket, is the identity", urls, placed)
    key = HAPROXY_KEYS[opt]
    rc, ini = import_ok(tag, "haproxy", path, f", key = {key}",
                        lambda ini: re.search(rf"(?m)^key = {re.escape(key)} +; balance uri", ini))
    written = dict(re.findall(r"\[backend (\S+)\]\nurl = [^\n]*\nweight = [^\n]*\nid = (\d+)\n", ini))
    t.check(written == ids and ids.get("c2") == "4" and ids.get("c4") == "5",
            f"{tag}: the ids written are haproxy's own ({', '.join(f'{k} {v}' for k, v in sorted(ids.items()))})",
            f"haproxy: {ids}\nimport: {written}")
    through_ringproxy(tag, ini if rc == 0 and ok else None, urls, placed)


# ---- nutcracker -----------------------------------------------------------------

def memcached(name):
    """A fake memcached on 127.0.0.1 (a harness Fake) for nutcracker's
    gets: `get KEY...` is answered with a value naming the server."""
    def serve(fake, s, n):
        buf = b""
        while True:
            line, buf = H.recv_line(s, buf)
            if line is None:
                return
            words = line.split()
            if len(words) < 2 or words[0] != b"get":
                s.sendall(b"ERROR\r\n")
                continue
            v = name.encode()
            s.sendall(b"".join(b"VALUE %s 0 %d\r\n%s\r\n" % (k, len(v), v) for k in words[1:]) + b"END\r\n")
    f = H.Fake(serve)
    f.name = name
    return f


def nutcracker_get(port, keys, deadline_s=120):
    """{key: the server that answered its get} through nutcracker."""
    out = {}
    deadline = time.monotonic() + deadline_s
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    f = s.makefile("rb")
    try:
        for k in keys:
            if time.monotonic() > deadline:
                break
            s.sendall(b"get " + k.encode() + b"\r\n")
            head = f.readline()
            if head.startswith(b"VALUE "):
                n = int(head.split()[3])
                out[k] = f.read(n + 2)[:n].decode()
                f.readline()  # END
            else:
                out[k] = head.strip().decode()
    finally:
        f.close()
        s.close()
    return out


def test_nutcracker(keys, hash_name):
    mcs = [memcached(n) for n in NAMES]
    port, stats = H.free_port(), H.free_port()
    # c3 without a name: its identity is host:port; the rest by name
    lines = "".join(f"   - 127.0.0.1:{m.port}:{w}{'' if i == 2 else ' ' + m.name}\n"
                    for i, (m, w) in enumerate(zip(mcs, WEIGHTS)))
    hash_line = f"  hash: {hash_name}\n" if hash_name != "fnv1a_64" else ""  # its default
    conf = (f"thumbs:\n  listen: 127.0.0.1:{port}\n{hash_line}  distribution: ketama\n"
            f"  auto_eject_hosts: false\n  timeout: 2000\n  servers:\n{lines}")
    path = H.write(f"nutcracker-{hash_name}.yml", conf)
    tag = f"nutcracker {hash_name}"
    p = start([NUTCRACKER, "-c", path, "-s", str(stats), "-a", "127.0.0.1",
               "-o", H.tmp_path(f"nutcracker-{hash_name}.log")], f"nutcracker-{hash_name}", port)
    placed = nutcracker_get(port, keys)
    H.stop_pid(p)
    save_vectors(f"nutcracker-{hash_name}", NUTCRACKER, conf, f"{NUTCRACKER} -c nutcracker.yml",
                 [f"{m.name if i != 2 else f'127.0.0.1:{m.port}'} weight {w}" for i, (m, w) in enumerate(zip(mcs, WEIGHTS))],
                 "the name, else host:port, is the identity; keys are memcached keys", keys, placed)
    for m in mcs:
        m.stop()
    ok = answered(tag, placed, keys, "keys", "servers")
    rc, ini = import_ok(tag, "ketama", path, f", key_hash = fnv1a_64 {'' if hash_name == 'fnv1a_64' else 'not '}written",
                        lambda ini: ("\nkey_hash = fnv1a_64\n" in ini) == (hash_name == "fnv1a_64"))
    if rc != 0 or not ok:
        t.check(False, f"{tag}: ringproxy's ring names the same server for every key (not run: nothing to compare)")
        return
    # the backend a url's port names is the server of that port
    by_port = {str(m.port): m.name for m in mcs}
    owner_of = {b: by_port[p] for b, p in re.findall(r"\[backend (\S+)\]\nurl = http://127\.0\.0\.1:(\d+)\n", ini)}
    ini_path = H.write(f"nutcracker-{hash_name}.ini", local(ini))
    key_path = H.write(f"nutcracker-{hash_name}.keys", "".join(k + "\n" for k in keys))
    r = subprocess.run([RP, "plan", ini_path, "--keys", key_path, "--raw-keys", "--per-key"],
                       capture_output=True, text=True, timeout=120)
    got = {}
    for line in r.stdout.splitlines():
        k, _, b = line.rpartition("\t")
        got[k] = owner_of.get(b, b)
    same = sum(1 for k in keys if got.get(k) == placed[k])
    diff = [f"{k[:120]}: {placed[k]} through nutcracker, {got.get(k)} by ringproxy's ring" for k in keys
            if got.get(k) != placed[k]]
    t.check(r.returncode == 0 and same == len(keys),
            f"{tag}: ringproxy's ring names the same server for {same} of {len(keys)} keys",
            (r.stderr[-2000:] + "\n" + "\n".join(diff[:30])).strip())


def main():
    r = subprocess.run([RP, "import", "nginx"], capture_output=True, text=True, timeout=30)
    t.check(r.returncode == 2 and r.stderr.startswith("usage: ringproxy import nginx FILE"),
            "ringproxy import without a file: usage, exit 2", f"exit {r.returncode}\n{r.stderr}")
    missing = [n for n, exe in (("nginx", NGINX), ("haproxy", HAPROXY), ("nutcracker", NUTCRACKER)) if not exe]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not installed: bash tests/deps.sh test")
    caches = [H.Cache(TC, n) for n in NAMES]
    urls = make_urls(NURLS)
    t.note(f"{len(urls)} URLs, {sum(1 for u in urls if '?' in u)} with a query, "
           f"{sum(1 for u in urls if '%' in u)} with %-escapes, {sum(1 for u in urls if len(u) > 1000)} "
           f"longer than 1000 bytes (the longest {max(map(len, urls))})")
    test_nginx(caches, urls, v4_only_name())
    for opt in HAPROXY_KEYS:
        test_haproxy(caches, urls, opt)
    # memcached keys: no longer than 250 bytes
    keys = [u for u in urls if len(u) <= 250]
    for h in ("md5", "fnv1a_64"):
        test_nutcracker(keys, h)


H.run_main(t, main)
