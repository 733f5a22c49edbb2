#!/usr/bin/env python3
"""test_reload_stop.py -- graceful stop, systemd notification and the log
file: a request in flight on SIGTERM completes while new connections are
refused; the service manager hears READY/RELOADING/STOPPING; a renamed log
file plus SIGUSR1 sends new lines to a new file.
usage: test_reload_stop.py RINGPROXY TESTCACHE"""

import http.client
import os
import re
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()


def connect_refused(port):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        return False
    except (ConnectionRefusedError, ConnectionResetError):
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_stop(ports):
    conf = H.write("stop.ini", H.conf_by_name(["cache-1", "cache-2"], ports,
                                              proxy={"shutdown_timeout": "10s"}))
    px = H.Proxy(RP, path=conf)
    idle = http.client.HTTPConnection("127.0.0.1", px.port, timeout=10)
    st, _, _ = H.get_on(idle, "/warm.jpg")
    t.check(st == 200, "an idle keep-alive client got its response")
    result = {}

    def slow(delay=2000):
        c = http.client.HTTPConnection("127.0.0.1", px.port, timeout=15)
        t0 = time.monotonic()
        try:
            c.request("GET", f"/slow.jpg?delay={delay}&size=1000")
            r = c.getresponse()
            result["conn"] = r.getheader("Connection")
            result["r"] = (r.status, r.getheader("X-Ringproxy-Backend"), r.read())
        except Exception as e:
            result["r"] = (f"{type(e).__name__}: {e}", None, b"")
        result["secs"] = time.monotonic() - t0
        c.close()

    th = threading.Thread(target=slow)
    th.start()
    time.sleep(0.5)  # the slow request is in flight
    since = px.log_size()
    t_sig = time.monotonic()
    px.signal(signal.SIGTERM)
    refused_at = None
    while time.monotonic() - t_sig < 1.2:
        if connect_refused(px.port):
            refused_at = time.monotonic() - t_sig
            break
        time.sleep(0.02)
    t.check(refused_at is not None and refused_at < 1.0,
            f"new connections are refused shortly after SIGTERM ({refused_at})")
    try:
        st, _, _ = H.get_on(idle, "/again.jpg")
        idle_closed = False
    except (http.client.HTTPException, OSError):
        idle_closed = True
    t.check(idle_closed, "an idle keep-alive connection is closed on SIGTERM")
    th.join(timeout=20)
    r = result.get("r", ("none", None, b""))
    t.check(r[0] == 200 and len(r[2]) == 1000,
            f"the request in flight completes with 200 and its whole body ({r[0]}, {result.get('secs', 0):.2f}s)")
    t.check(result.get("conn") == "close", f"its response says Connection: close ({result.get('conn')})")
    rc = px.wait(15)
    t.check(rc == 0, f"exit code 0 after a graceful stop (rc {rc})")
    log = px.log()[since:]
    t.check(re.search(r"info: stopping on Terminated: ", log) is not None
            and re.search(r"info: stopped\n", log) is not None,
            "logs 'stopping on Terminated: ...' and 'stopped'")

    # a second signal stops at once, still exit 0
    px = H.Proxy(RP, path=conf)
    th = threading.Thread(target=slow, args=(6000,))
    result.clear()
    th.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    px.signal(signal.SIGTERM)
    px.wait_log(r"stopping on Terminated", timeout=5)
    px.signal(signal.SIGINT)
    rc = px.wait(10)
    secs = time.monotonic() - t0
    th.join(timeout=20)
    t.check(rc == 0 and secs < 3.0, f"a second signal stops at once, not after the 6 s request ({secs:.2f}s, rc {rc})")
    t.check("second Interrupt: stopping now" in px.log(), "the second signal is logged")

    # shutdown_timeout bounds the wait for a request that takes too long
    conf = H.write("stop2.ini", H.conf_by_name(["cache-1"], ports, proxy={"shutdown_timeout": "500ms"}))
    px = H.Proxy(RP, path=conf)
    c = http.client.HTTPConnection("127.0.0.1", px.port, timeout=15)
    c.putrequest("GET", "/slower.jpg?delay=5000")
    c.endheaders()
    time.sleep(0.3)
    t0 = time.monotonic()
    px.signal(signal.SIGTERM)
    rc = px.wait(10)
    secs = time.monotonic() - t0
    c.close()
    t.check(rc == 0 and 0.4 < secs < 3.0, f"shutdown_timeout 500ms ends a 5 s request's wait ({secs:.2f}s, rc {rc})")
    t.check("shutdown_timeout reached" in px.log(), "the timeout is logged")


def recv_all(sock, until, timeout):
    """Datagrams until one contains until; returns the list."""
    msgs = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            msgs.append(sock.recv(4096).decode())
        except socket.timeout:
            break
        if until in msgs[-1]:
            break
    return msgs


def test_notify(ports, abstract):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"ringproxy-test-{os.getpid()}-{time.monotonic_ns()}"
        sock.bind("\0" + name)
        env = {"NOTIFY_SOCKET": "@" + name}
        kind = "abstract"
    else:
        path = H.tmp_path("notify.sock")
        sock.bind(path)
        env = {"NOTIFY_SOCKET": path}
        kind = "path"
    conf = H.write("notify.ini", H.conf_by_name(["cache-1", "cache-2", "cache-3"], ports))
    px = H.Proxy(RP, path=conf, env=env)
    msgs = recv_all(sock, "READY=1", 5)
    t.check(len(msgs) == 1 and msgs[0] ==
            f"READY=1\nSTATUS=generation 1, 3 backends, listening on 127.0.0.1:{px.port}",
            f"[{kind}] READY=1 with the generation, backends and the real address at start: {msgs!r}")
    conf4 = H.conf_by_name(["cache-1", "cache-2", "cache-3", "cache-4"], ports)
    H.write("notify.ini", conf4)
    px.signal(signal.SIGHUP)
    msgs = recv_all(sock, "READY=1", 10)
    now = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6
    t.check(len(msgs) == 2, f"[{kind}] a reload sends two messages: {msgs!r}")
    m = re.fullmatch(r"RELOADING=1\nMONOTONIC_USEC=(\d+)\nSTATUS=reloading " + re.escape(conf), msgs[0] if msgs else "")
    t.check(m is not None, f"[{kind}] RELOADING=1, MONOTONIC_USEC=, STATUS=reloading FILE")
    t.check(m is not None and 0 <= now - int(m.group(1)) < 5e6,
            f"[{kind}] MONOTONIC_USEC is CLOCK_MONOTONIC in microseconds")
    t.check(len(msgs) == 2 and msgs[1] ==
            f"READY=1\nSTATUS=generation 2, 4 backends, listening on 127.0.0.1:{px.port}",
            f"[{kind}] READY=1 with generation 2 after the reload")
    H.write("notify.ini", "[proxy]\nworkers = x\n")
    px.signal(signal.SIGHUP)
    msgs = recv_all(sock, "READY=1", 10)
    t.check(len(msgs) == 2 and msgs[0].startswith("RELOADING=1\n") and msgs[1] ==
            f"READY=1\nSTATUS=generation 2, 4 backends, listening on 127.0.0.1:{px.port}",
            f"[{kind}] a failed reload still ends with READY=1, generation 2: {msgs!r}")
    # listen changes need a restart: the status keeps the address in use
    H.write("notify.ini", conf4.replace("listen = 127.0.0.1:0", "listen = 127.0.0.1:1"))
    px.signal(signal.SIGHUP)
    msgs = recv_all(sock, "READY=1", 10)
    t.check(len(msgs) == 2 and msgs[1] ==
            f"READY=1\nSTATUS=generation 3, 4 backends, listening on 127.0.0.1:{px.port}",
            f"[{kind}] after a reload that changes listen, STATUS still names the address in use: {msgs!r}")
    warn = "warn: reload: listen and workers change only with a restart; still listening on 127.0.0.1:%d with 2 workers"
    t.check(px.log().count(warn % px.port) == 1, f"[{kind}] the listen change is logged as needing a restart, with the address in use")
    px.signal(signal.SIGHUP)  # the same file again: still not applied, still said
    recv_all(sock, "READY=1", 10)
    t.check(px.log().count(warn % px.port) == 2, f"[{kind}] a second reload with the same unapplied listen warns again")
    H.write("notify.ini", conf4.replace("workers = 2", "workers = 1"))
    px.signal(signal.SIGHUP)
    recv_all(sock, "READY=1", 10)
    t.check(px.log().count(warn % px.port) == 3, f"[{kind}] a workers change warns too")
    H.write("notify.ini", conf4)
    px.signal(signal.SIGHUP)
    msgs = recv_all(sock, "READY=1", 10)
    t.check(px.log().count(warn % px.port) == 3 and msgs[-1].startswith("READY=1\nSTATUS=generation 6,"),
            f"[{kind}] back to the listen and workers in use: no warning")
    px.signal(signal.SIGTERM)
    msgs = recv_all(sock, "STOPPING=1", 10)
    t.check(len(msgs) == 1 and msgs[0].startswith("STOPPING=1\nSTATUS=stopping on Terminated"),
            f"[{kind}] STOPPING=1 on SIGTERM: {msgs!r}")
    t.check(px.wait(15) == 0, f"[{kind}] exit 0")
    sock.close()


def test_log_file(ports):
    logp = H.tmp_path("rp.log")
    conf = H.write("log.ini", H.conf_by_name(["cache-1", "cache-2"], ports, proxy={"log_file": logp}))
    px = H.Proxy(RP, path=conf, log_file=logp)
    H.LOGS += [logp, logp + ".1", logp + ".2", H.tmp_path("rp2.log")]  # fd 2 is there
    t.check(px.alive() and "listening on" in open(logp).read(), "log_file receives the log lines")
    os.rename(logp, logp + ".1")
    px.log_path = logp + ".1"
    line = px.reload()
    t.check(line is not None and line.startswith("reload 2:"), "after the rename, lines still go to the renamed file")
    px.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while not os.path.exists(logp) and time.monotonic() < deadline:
        time.sleep(0.01)
    t.check(os.path.exists(logp), "SIGUSR1 creates a new file at the configured path")
    px.log_path = logp
    t.check(px.wait_log(r"SIGUSR1: log file \S+ reopened", timeout=5) is not None and "reload 2:" not in px.log(),
            "the new file gets the reopen line and none of the old lines")
    line = px.reload()
    t.check(line is not None and line.startswith("reload 3:"), "new lines land in the new file")
    old = open(logp + ".1").read()
    t.check("reload 2:" in old and "reload 3:" not in old, "the rotated file keeps the old lines and gets no new ones")
    # a log_file that cannot be opened: the error goes to the file in use,
    # which SIGUSR1 still reopens
    H.write("log.ini", H.conf_by_name(["cache-1", "cache-2"], ports,
                                      proxy={"log_file": H.tmp_path("no-such-dir/x.log")}))
    px.signal(signal.SIGHUP)
    t.check(px.wait_log(r"reload 4: ", timeout=5) is not None
            and re.search(r"error: reload: log file \S+no-such-dir/x\.log: No such file", px.log()) is not None,
            "a reload naming a log_file that cannot be opened logs why in the file in use")
    os.rename(logp, logp + ".2")
    px.signal(signal.SIGUSR1)
    px.log_path = logp
    t.check(px.wait_log(r"SIGUSR1: log file \S+ reopened", timeout=5) is not None,
            "and SIGUSR1 afterwards still reopens the file in use")
    H.write("log.ini", H.conf_by_name(["cache-1", "cache-2"], ports, proxy={"log_file": logp}))
    line = px.reload()
    t.check(line is not None and line.startswith("reload 5:"), "the next reload logs there")

    # another file on reload, then none: back to stderr
    logp2 = H.tmp_path("rp2.log")
    H.write("log.ini", H.conf_by_name(["cache-1", "cache-2"], ports, proxy={"log_file": logp2}))
    line = px.reload()
    t.check(px.wait_log(r"reload 6: ", timeout=5, path=logp2) is not None and "reload 6:" not in open(logp).read(),
            "a reload that names another log_file moves the log there")
    H.write("log.ini", H.conf_by_name(["cache-1", "cache-2"], ports))
    px.signal(signal.SIGHUP)
    t.check(px.wait_log(r"reload 7: ", timeout=5, path=px.stderr_path) is not None
            and "reload 7:" not in open(logp2).read(),
            "a reload that removes log_file sends the log back to stderr")
    px.log_path = px.stderr_path
    px.signal(signal.SIGTERM)
    t.check(px.wait(15) == 0, "exit 0")
    t.check("stopped" in px.log(), "'stopped' is on stderr")


def test_burst(ports):
    conf = H.write("burst.ini", H.conf_by_name(["cache-1", "cache-2"], ports))
    px = H.Proxy(RP, path=conf)
    since = px.log_size()
    for k in range(30):  # the file changes between signals; the last is 4 backends
        H.write("burst.ini", H.conf_by_name(["cache-1", "cache-2", "cache-3"][: 2 + k % 2], ports))
        px.signal(signal.SIGHUP)
    H.write("burst.ini", H.conf_by_name(["cache-1", "cache-2", "cache-3", "cache-4"], ports))
    px.signal(signal.SIGHUP)
    m = px.wait_log(r": reload \d+: [^\n]*\n(?![\s\S]*: reload \d+:)", timeout=10, since=since)
    time.sleep(0.5)  # any reload still queued shows up by now
    lines = re.findall(r"info: (reload \d+: [^\n]*)", px.log()[since:])
    t.note(f"31 SIGHUPs in a burst gave {len(lines)} reloads; last: {lines[-1] if lines else None}")
    t.check(m is not None and 1 <= len(lines) <= 31 and "reload failed" not in px.log(),
            "a burst of 31 SIGHUPs gives between 1 and 31 successful reloads")
    seen = set(H.backends_of(px.port, [f"/burst/{i}.jpg" for i in range(200)], time.monotonic() + 30).values())
    t.check(seen == {"cache-1", "cache-2", "cache-3", "cache-4"},
            f"after the burst the file's last content is in effect: {sorted(seen)}")
    # SIGHUP while stopping is ignored; the stop completes
    c = http.client.HTTPConnection("127.0.0.1", px.port, timeout=15)
    c.putrequest("GET", "/stopping.jpg?delay=800")
    c.endheaders()
    time.sleep(0.2)
    since = px.log_size()
    px.signal(signal.SIGTERM)
    px.wait_log(r"stopping on Terminated", timeout=5, since=since)
    px.signal(signal.SIGHUP)
    r = c.getresponse()
    t.check(r.status == 200 and len(r.read()) > 0, "a SIGHUP while stopping does not disturb the request in flight")
    c.close()
    t.check(px.wait(15) == 0 and not re.search(r": reload \d+:|: reload failed", px.log()[since:]),
            "a SIGHUP while stopping starts no reload; exit 0")


def test_inflight(ports):
    """Requests in flight across a reload that removes their backend, and
    across a stop under keep-alive load: no response is cut short."""
    four = ["cache-1", "cache-2", "cache-3", "cache-4"]
    conf = H.write("inflight.ini", H.conf_by_name(four, ports))
    px = H.Proxy(RP, path=conf)
    ring = ringref.Ring([(n, 1) for n in four], 160)
    q = "?delay=1000&size=30000"  # the key is path+query
    on4 = [f"/if/{i}.jpg{q}" for i in range(400) if ring.lookup(f"/if/{i}.jpg{q}".encode()) == "cache-4"][:3]
    results = []

    def one(p):
        c = http.client.HTTPConnection("127.0.0.1", px.port, timeout=15)
        try:
            c.request("GET", p)
            r = c.getresponse()
            results.append((r.status, r.getheader("X-Ringproxy-Backend"), len(r.read())))
        except Exception as e:
            results.append((f"{type(e).__name__}: {e}", None, 0))
        c.close()

    ths = [threading.Thread(target=one, args=(p,)) for p in on4]
    for th in ths:
        th.start()
    time.sleep(0.3)
    H.write("inflight.ini", H.conf_by_name(four[:3], ports))
    line = px.reload()
    for th in ths:
        th.join(timeout=20)
    t.check(line is not None and "-cache-4" in line, "cache-4 removed while requests to it are in flight")
    t.check(len(results) == 3 and all(r == (200, "cache-4", 30000) for r in results),
            f"those requests complete from cache-4 with their whole bodies: {results}")
    c = http.client.HTTPConnection("127.0.0.1", px.port, timeout=10)
    st, be, _ = H.get_on(c, on4[0])
    c.close()
    t.check(st == 200 and be != "cache-4", f"the same URL now goes to another cache ({be})")

    # stop under keep-alive load: a response either arrives whole or not at all
    stop = threading.Event()
    outcome = {"whole": 0, "cut": 0, "closed": 0, "other": []}
    lock = threading.Lock()

    def loop(i):
        c = http.client.HTTPConnection("127.0.0.1", px.port, timeout=15)
        for j in range(2000):
            if stop.is_set():
                break
            try:
                c.request("GET", f"/load/{i}/{j}.jpg?size=100000&delay={j % 3 * 20}")
                r = c.getresponse()
                body = r.read()
                with lock:
                    outcome["whole" if r.status == 200 and len(body) == 100000 else "cut"] += 1
            except http.client.IncompleteRead:
                with lock:
                    outcome["cut"] += 1
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                with lock:  # closed or refused before a response began
                    outcome["closed"] += 1
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", px.port, timeout=15)
                time.sleep(0.01)
            except Exception as e:
                with lock:
                    outcome["other"].append(f"{type(e).__name__}: {e}")
                break
        c.close()

    ths = [threading.Thread(target=loop, args=(i,)) for i in range(6)]
    for th in ths:
        th.start()
    time.sleep(1.0)
    px.signal(signal.SIGTERM)
    rc = px.wait(15)
    time.sleep(0.2)
    stop.set()
    for th in ths:
        th.join(timeout=30)
    t.note(f"stop under load: {outcome}")
    t.check(rc == 0, "exit 0 after a stop under load")
    t.check(outcome["whole"] > 20 and outcome["cut"] == 0 and not outcome["other"],
            "under load, no response was cut short by the stop (each arrived whole, or the connection closed before it began)")


def main():
    ports = {n: H.Cache(TC, n).port for n in [f"cache-{i}" for i in range(1, 5)]}
    test_inflight(ports)
    test_burst(ports)
    test_stop(ports)
    test_notify(ports, abstract=False)
    test_notify(ports, abstract=True)
    test_log_file(ports)


H.run_main(t, main)
