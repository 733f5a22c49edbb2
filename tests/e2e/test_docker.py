#!/usr/bin/env python3
"""test_docker.py -- docker/compose.yaml, docker/Dockerfile and the demo's
files hold together, checked without Docker or a network: the compose
file (read by miniyaml.py, a small reader of the block YAML it is written in) names
the services, build targets, ports, mounts and addresses the other files
rely on; the config it mounts passes `ringproxy -t` and lists exactly its
caches; the caches' VCL admits PURGE from ringproxy's fixed address; the
image's HEALTHCHECK asks the admin listener's /health; the origin serves
real PNG thumbnails and counts them. Where `docker compose` is installed,
it validates the file too.
usage: test_docker.py RINGPROXY SOURCE_ROOT"""

import http.client
import ipaddress
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import miniyaml  # noqa: E402

RP, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
DOCKER = os.path.join(ROOT, "docker")
t = H.Tap()


def ini(path):
    """{section: {key: value}} of a ringproxy config (comments dropped)."""
    out, sec = {}, None
    for line in open(path):
        line = re.split(r"\s;", line.strip(), maxsplit=1)[0].strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("["):
            sec = line.strip("[]")
            out[sec] = {}
        else:
            k, _, v = line.partition("=")
            out[sec][k.strip()] = v.strip()
    return out


def check_compose():
    text = open(os.path.join(DOCKER, "compose.yaml")).read()
    try:
        doc = miniyaml.load(text)
    except ValueError as e:
        t.check(False, f"docker/compose.yaml parses: {e}")
        return
    t.check(isinstance(doc, dict) and "services" in doc, "docker/compose.yaml parses (block YAML)")
    svcs = doc.get("services", {})
    caches = sorted(n for n in svcs if n.startswith("cache-"))
    t.check(set(svcs) == {"origin", "ringproxy", *caches, "prometheus", "grafana"} and len(caches) == 3,
            f"services: ringproxy, three caches, the origin, prometheus, grafana ({sorted(svcs)})")
    monitors = ("prometheus", "grafana")

    dockerfile = open(os.path.join(DOCKER, "Dockerfile")).read()
    stages = re.findall(r"^FROM \S+ AS (\S+)$", dockerfile, re.M)
    t.check(stages and stages[-1] == "ringproxy", f"the Dockerfile's last stage is ringproxy ({stages})")
    bad = []
    for name, s in svcs.items():
        if name in monitors:
            continue
        b = s.get("build", {})
        if not (b.get("context") == ".." and b.get("dockerfile") == "docker/Dockerfile" and
                b.get("target") in stages):
            bad.append(f"{name}: {b}")
    t.check(not bad, "every service builds a stage of docker/Dockerfile from the checkout", "\n".join(bad))
    t.check(all(svcs[c]["build"]["target"] == "varnish" for c in caches) and
            svcs["origin"]["build"]["target"] == "origin", "caches are the varnish stage, the origin its own")

    rp = svcs["ringproxy"]
    t.check(set(rp.get("depends_on", [])) == set(caches), "ringproxy starts after the three caches")
    vols = rp.get("volumes", [])
    t.check("./ringproxy:/etc/ringproxy:ro" in vols and
            os.path.isfile(os.path.join(DOCKER, "ringproxy", "ringproxy.ini")),
            "the config's directory is mounted read-only at /etc/ringproxy (watch_config sees renames)")
    conf = ini(os.path.join(DOCKER, "ringproxy", "ringproxy.ini"))
    admin_port = conf["proxy"]["admin_listen"].rsplit(":", 1)[1]
    listen_port = conf["proxy"]["listen"].rsplit(":", 1)[1]
    ports = rp.get("ports", [])
    t.check(f"{listen_port}:{listen_port}" in ports, f"the proxy's port {listen_port} is published")
    t.check(f"127.0.0.1:{admin_port}:{admin_port}" in ports and
            not any(p.endswith(f":{admin_port}") and not p.startswith("127.0.0.1:") for p in ports),
            f"the stats page ({admin_port}) is published on the host's loopback only")
    t.check(conf["proxy"]["admin_listen"].startswith("0.0.0.0:") and
            conf["proxy"].get("admin_token"),
            "the config listens for admin on the container network, with a token")
    env = rp.get("environment", {})
    t.check(env.get("RINGPROXY_ADMIN") == f"127.0.0.1:{admin_port}" and
            env.get("RINGPROXY_ADMIN_TOKEN") == conf["proxy"].get("admin_token") and
            re.search(r'HEALTHCHECK .*\n?.*curl -fsS -o /dev/null -H "Authorization: Bearer \$RINGPROXY_ADMIN_TOKEN" \\\n\s*"http://\$RINGPROXY_ADMIN/health"', dockerfile)
            and re.search(r"ENV RINGPROXY_ADMIN=127\.0\.0\.1:" + admin_port, dockerfile),
            "the image's HEALTHCHECK GETs the admin listener's /health with the config's token")

    # backends: exactly the cache services, on Varnish's port
    backends = {s.split(" ", 1)[1]: v["url"] for s, v in conf.items() if s.startswith("backend ")}
    vport = re.search(r"varnishd -F -a :(\d+)", dockerfile).group(1)
    t.check(backends == {c: f"http://{c}:{vport}" for c in caches},
            f"the config lists the three caches by service name on port {vport}", backends)
    t.check(conf["health"]["path"] == "/health" and "passive_5xx" not in conf["health"],
            "checks ask Varnish's /health; passive_5xx is left off")

    check_monitoring(svcs, conf, admin_port)

    # addresses: ringproxy's fixed one is the caches' PURGE ACL
    net = doc["networks"]["tier"]["ipam"]["config"][0]["subnet"]
    addr = rp["networks"]["tier"]["ipv4_address"]
    t.check(ipaddress.ip_address(addr) in ipaddress.ip_network(net), f"ringproxy's {addr} is in {net}")
    t.check(all(svcs[c]["environment"]["RINGPROXY"] == addr for c in caches),
            "each cache admits PURGE from ringproxy's address")
    vcl = open(os.path.join(ROOT, "tests", "e2e", "varnish.vcl")).read()
    t.check("COPY tests/e2e/varnish.vcl" in dockerfile and all(f"@{v}@" in vcl for v in
                                                                ("ORIGIN_HOST", "ORIGIN_PORT", "RINGPROXY")),
            "the caches run the VCL test_varnish.py tests, filled from their environment")
    oport = re.search(r"FROM \S+ AS origin\n(?:.*\n)*?EXPOSE (\d+)", dockerfile).group(1)
    t.check(all(svcs[c]["environment"]["ORIGIN_HOST"] == "origin" and
                svcs[c]["environment"]["ORIGIN_PORT"] == oport for c in caches),
            f"the caches fetch from the origin service on its port {oport}")

    # the mounted config as the proxy reads it
    p = subprocess.run([RP, "-t", "-c", os.path.join(DOCKER, "ringproxy", "ringproxy.ini")],
                       capture_output=True, text=True, timeout=60)
    t.check(p.returncode == 0 and "configuration ok" in p.stdout,
            "ringproxy -t accepts docker/ringproxy/ringproxy.ini (cache names resolve only in compose)",
            p.stdout + p.stderr)

    # docker compose itself, where it is installed
    try:
        v = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
        have = v.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        have = False
    if have:
        c = subprocess.run(["docker", "compose", "-f", os.path.join(DOCKER, "compose.yaml"), "config", "-q"],
                           capture_output=True, text=True, timeout=60)
        t.check(c.returncode == 0, "docker compose config accepts the file", c.stderr)
    else:
        t.skip("docker compose config accepts the file", "no docker compose here")


def check_monitoring(svcs, conf, admin_port):
    """Prometheus scrapes the proxy's admin listener with its token; Grafana
    gets Prometheus and the dashboard by provisioning; both from pinned
    images, published on the host's loopback only. (The dashboard's queries
    are checked against the metrics by tests/unit/test_dashboard.py.)"""
    prom, graf = svcs.get("prometheus", {}), svcs.get("grafana", {})
    t.check(all(re.match(r"^[\w./-]+:v?\d+\.\d+\.\d+$", s.get("image", "")) for s in (prom, graf)),
            f"prometheus and grafana run pinned images ({prom.get('image')}, {graf.get('image')})")
    t.check(all(p.startswith("127.0.0.1:") for s in (prom, graf) for p in s.get("ports", [])) and
            "127.0.0.1:9090:9090" in prom.get("ports", []) and "127.0.0.1:3000:3000" in graf.get("ports", []),
            "Prometheus and Grafana are published on the host's loopback only")
    pconf = miniyaml.load(open(os.path.join(DOCKER, "prometheus", "prometheus.yml")).read())
    job = pconf["scrape_configs"][0]
    t.check("./prometheus:/etc/prometheus:ro" in prom.get("volumes", []) and
            job["static_configs"][0]["targets"] == [f"ringproxy:{admin_port}"] and
            job.get("metrics_path") == "/metrics" and
            job.get("authorization", {}).get("credentials") == conf["proxy"].get("admin_token"),
            f"Prometheus scrapes ringproxy:{admin_port}/metrics with the config's admin_token", job)
    ds = miniyaml.load(open(os.path.join(DOCKER, "grafana", "provisioning", "datasources",
                                         "prometheus.yaml")).read())["datasources"][0]
    prov = miniyaml.load(open(os.path.join(DOCKER, "grafana", "provisioning", "dashboards",
                                           "ringproxy.yaml")).read())["providers"][0]
    vols = graf.get("volumes", [])
    dash = json.load(open(os.path.join(DOCKER, "grafana", "dashboards", "ringproxy.json")))
    uids = {p.get("datasource", {}).get("uid") for p in dash["panels"] if p["type"] != "row"}
    t.check(ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090" and
            "./grafana/provisioning:/etc/grafana/provisioning:ro" in vols and
            f"./grafana/dashboards:{prov['options']['path']}:ro" in vols and uids == {ds["uid"]},
            "Grafana is provisioned with the Prometheus service and the dashboard, whose panels name it",
            f"{ds} {prov} {vols} {uids}")


def check_origin():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen([sys.executable, os.path.join(DOCKER, "origin.py"), "--listen", f"127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL)
    H._procs.append(p)

    def up():
        try:
            return H.get(port, "/health", timeout=2)[0] == 200
        except OSError:
            return False
    if not t.check(H.wait_until(up, 20), "the origin starts"):
        return
    st, h, body = H.get(port, "/thumbs/42_120x80.png")
    w, hh = struct.unpack(">II", body[16:24]) if len(body) > 24 else (0, 0)
    t.check(st == 200 and body[:8] == b"\x89PNG\r\n\x1a\n" and (w, hh) == (120, 80) and
            h.get("content-type") == "image/png", f"it generates a 120x80 PNG ({w}x{hh})")
    t.check("max-age" in h.get("cache-control", ""), "cacheable")
    st2, _, body2 = H.get(port, "/thumbs/42_120x80.png")
    st3, _, body3 = H.get(port, "/thumbs/43_120x80.png")
    t.check(body2 == body and body3 != body, "the same URL, the same bytes; another id, another image")
    st, _, stats = H.get(port, "/stats")
    t.check(json.loads(stats)["fetches"] == 3, "it counts what it served")
    H.stop_pid(p)


def main():
    check_compose()
    check_origin()


H.run_main(t, main)
