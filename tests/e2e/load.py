"""load.py -- bounded client load on a proxy: threads with keep-alive
connections, bounded in requests and time. Standard library only."""

import http.client
import threading
import time


def load(port, pick_path, clients=64, seconds=3.0, max_requests=20000, timeout=10):
    """clients threads, each with one keep-alive connection, GET pick_path(i)
    until seconds pass or max_requests were sent in all. Returns a list of
    (path, status, backend header, retry-after header or None); a request
    that failed without a response is (path, 0, error text, None)."""
    results = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    count = [0]

    def client(cid):
        conn = None
        i = 0
        while time.monotonic() < deadline:
            with lock:
                if count[0] >= max_requests:
                    return
                count[0] += 1
            path = pick_path(cid * 1000003 + i)
            i += 1
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                res = (path, r.status, r.getheader("X-Ringproxy-Backend"), r.getheader("Retry-After"))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                res = (path, 0, f"{type(e).__name__}: {e}", None)
                if conn is not None:
                    conn.close()
                conn = None
            with lock:
                results.append(res)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout + 5)
    with lock:
        return list(results)


def load_until(port, pick_path, clients, requests, at=None, seconds=120.0, timeout=10):
    """load() bounded by the work: until requests GETs are done (seconds,
    generous, only bounds a stuck run), so that a loaded machine makes the
    same run, slower. at=(k, fn): fn() runs on a thread of its own once
    the k-th request is picked (a cache killed after k requests rather
    than after a time). Returns load()'s list."""
    started = [0]
    lock = threading.Lock()
    reached = threading.Event()

    def pick(i):
        with lock:
            started[0] += 1
            if at is not None and started[0] == at[0]:
                reached.set()
        return pick_path(i)

    def run_at():
        if reached.wait(seconds):
            at[1]()

    th = threading.Thread(target=run_at, daemon=True) if at is not None else None
    if th:
        th.start()
    res = load(port, pick, clients=clients, seconds=seconds, max_requests=requests, timeout=timeout)
    if th:
        reached.set()       # a run that ended before k: fn still runs, after it
        th.join(seconds)
    return res
