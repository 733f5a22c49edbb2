#!/usr/bin/env python3
"""test_deploy.py -- the ways ringproxy(7) FLEETS distributes the config
file, each checked as far as it can be without its tool: the Kubernetes
manifests (docker/kubernetes.yaml: the ConfigMap's file passes ringproxy
-t and names the StatefulSet's pods on its port, mounted as a directory
with watch_config; the probes, ports and VCL agree; varnishd -C compiles
the VCL; docker/kubernetes-discovery.yaml: its file, with [discovery]
and no [backend], passes -t and names the headless Service's SRV
records), the Ansible template and playbook (conf/ansible: rendered for a
sample inventory by a small renderer of the Jinja it uses, the file passes
the playbook's own validate command, a bad inventory is refused by it, the
handlers check before they reload) and the consul-template template
(conf/consul-template: rendered for sample services, passes -t, and the
command checks the new file before it replaces the live one).
usage: test_deploy.py RINGPROXY SOURCE_ROOT"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import miniyaml  # noqa: E402

RP, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
t = H.Tap()
VARNISHD = shutil.which("varnishd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def check_t(path, what):
    """ringproxy -t on path: (exit status, output); a check line."""
    p = subprocess.run([RP, "-t", "-c", path], capture_output=True, text=True, timeout=60)
    t.check(p.returncode == 0 and "configuration ok" in p.stdout, f"{what} passes ringproxy -t",
            p.stdout + p.stderr)
    return p


def backends(text):
    """{name: url} of a ringproxy config's text."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^\[backend (\S+)\]", line)
        if m:
            name = m.group(1)
        m = re.match(r"^url = (\S+)", line)
        if m and name:
            out[name] = m.group(1)
    return out


# ---- Jinja, the part the Ansible template uses -----------------------------

def jinja_eval(expr, ctx):
    """a, a.b, a[b], a['b'] chains over dicts."""
    toks = re.findall(r"[A-Za-z_]\w*|\[[^\]]+\]|\.", expr.strip())
    if "".join(toks) != expr.strip().replace(" ", ""):
        raise ValueError(f"unsupported expression {expr!r}")
    val = ctx[toks[0]]
    for tok in toks[1:]:
        if tok == ".":
            continue
        if tok.startswith("["):
            inner = tok[1:-1].strip()
            key = inner[1:-1] if inner[:1] in "'\"" else jinja_eval(inner, ctx)
        else:
            key = tok
        val = val[key]
    return val


def jinja_render(text, ctx):
    """{{ expr }} and {% for x in expr %}...{% endfor %}, with Ansible's
    trim_blocks (the newline after a block tag is dropped)."""
    out, pos = [], 0
    pat = re.compile(r"\{\{(.*?)\}\}|\{%\s*for (\w+) in (.*?)\s*%\}\n?(.*?)\{%\s*endfor\s*%\}\n?", re.S)
    for m in pat.finditer(text):
        out.append(text[pos:m.start()])
        if m.group(1) is not None:
            out.append(str(jinja_eval(m.group(1), ctx)))
        else:
            for item in jinja_eval(m.group(3), ctx):
                out.append(jinja_render(m.group(4), dict(ctx, **{m.group(2): item})))
        pos = m.end()
    out.append(text[pos:])
    res = "".join(out)
    if "{{" in res or "{%" in res:
        raise ValueError("unrendered template syntax left")
    return res


def check_ansible(tmp):
    d = os.path.join(ROOT, "conf", "ansible")
    play = miniyaml.load(open(os.path.join(d, "ringproxy.yml")).read())[0]
    task = play["tasks"][0]["ansible.builtin.template"]
    t.check(task["src"] == "ringproxy.ini.j2" and os.path.isfile(os.path.join(d, task["src"])),
            "ansible: the template task renders ringproxy.ini.j2")
    t.check(task["validate"] == "{{ ringproxy_bin }} -t -c %s",
            "ansible: the rendered file must pass ringproxy -t before it replaces the old one (validate)")
    notify = play["tasks"][0]["notify"]
    hs = play["handlers"]
    t.check(len(hs) == 2 and all(h["listen"] == notify for h in hs) and
            hs[0]["ansible.builtin.command"] == "{{ ringproxy_bin }} -t -c {{ ringproxy_conf }}" and
            hs[1]["ansible.builtin.systemd"]["state"] == "reloaded",
            "ansible: a change runs the handlers: ringproxy -t on the file, then the reload")

    inventory = {"thumbs-a": ("10.0.0.11", "6081", "1"), "thumbs-b": ("10.0.0.12", "6081", "1"),
                 "thumbs-c": ("10.0.0.13", "6081", "2")}

    def render(inv):
        ctx = dict(play["vars"])
        ctx["ansible_managed"] = "Ansible managed"
        ctx["groups"] = {ctx["ringproxy_cache_group"]: list(inv)}
        ctx["hostvars"] = {h: {"ansible_host": a, "varnish_port": p, "ring_weight": w}
                           for h, (a, p, w) in inv.items()}
        return jinja_render(open(os.path.join(d, task["src"])).read(), ctx)

    text = render(inventory)
    path = os.path.join(tmp, "ansible.ini")
    with open(path, "w") as f:
        f.write(text)
    check_t(path, "ansible: the template rendered for a sample inventory")
    t.check(backends(text) == {h: f"http://{a}:{p}" for h, (a, p, w) in inventory.items()},
            "ansible: one backend per cache host, named by its inventory name")
    # the validate command as Ansible runs it (%s: the rendered temp file)
    cmd = task["validate"].replace("{{ ringproxy_bin }}", shlex.quote(RP)).replace("%s", shlex.quote(path))
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
    t.check(p.returncode == 0, "ansible: the validate command accepts it")
    bad = dict(inventory, **{"thumbs-c": ("10.0.0.13", "6081x", "2")})
    with open(path, "w") as f:
        f.write(render(bad))
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
    t.check(p.returncode == 1 and re.search(re.escape(path) + r":\d+: url: ", p.stderr),
            "ansible: a bad inventory (port 6081x) is refused by validate, with FILE:LINE", p.stderr)


def check_consul(tmp):
    d = os.path.join(ROOT, "conf", "consul-template")
    tmpl = open(os.path.join(d, "ringproxy.ini.ctmpl")).read()
    services = {"thumbs": [{"Node": "cache-node-1", "Address": "10.1.0.21", "Port": "6081"},
                           {"Node": "cache-node-2", "Address": "10.1.0.22", "Port": "6081"},
                           {"Node": "cache-node-3", "Address": "10.1.0.23", "Port": "6082"}]}

    def render(text):
        def rng(m):
            return "".join(re.sub(r"\{\{ \.(\w+) \}\}", lambda f: svc[f.group(1)], m.group(2))
                           for svc in services[m.group(1)])
        out = re.sub(r'\{\{ range service "(\w+)" \}\}(.*?)\{\{ end \}\}', rng, text, flags=re.S)
        if "{{" in out:
            raise ValueError("unrendered template syntax left")
        return out

    text = render(tmpl)
    path = os.path.join(tmp, "consul.ini")
    with open(path, "w") as f:
        f.write(text)
    check_t(path, "consul-template: the template rendered for sample services")
    t.check(backends(text) == {s["Node"]: f"http://{s['Address']}:{s['Port']}" for s in services["thumbs"]},
            "consul-template: one backend per instance, named by its node")
    hcl = open(os.path.join(d, "ringproxy.hcl")).read()
    dest = re.search(r'destination\s*=\s*"([^"]+)"', hcl).group(1)
    live = dest[:-len(".new")] if dest.endswith(".new") else None
    cmd = re.search(r'command\s*=\s*"([^"]+)"', hcl).group(1)
    steps = [s.strip() for s in cmd.split("&&")]
    t.check(live and len(steps) == 3 and steps[0].endswith(f"ringproxy -t -c {dest}") and
            steps[1] == f"mv {dest} {live}" and steps[2] == "systemctl reload ringproxy",
            "consul-template: render beside the live file, ringproxy -t it, then move it in and reload")


def check_kubernetes(tmp):
    docs = miniyaml.load_all(open(os.path.join(ROOT, "docker", "kubernetes.yaml")).read())
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    cm, sts = by[("ConfigMap", "ringproxy")], by[("StatefulSet", "thumbs")]
    dep, hsvc = by[("Deployment", "ringproxy")], by[("Service", sts["spec"]["serviceName"])]
    text = cm["data"]["ringproxy.ini"]
    path = os.path.join(tmp, "k8s.ini")
    with open(path, "w") as f:
        f.write(text)
    p = check_t(path, "kubernetes: the ConfigMap's ringproxy.ini")
    t.check("warning:" in p.stderr and "cannot resolve 'thumbs-0.thumbs'" in p.stderr,
            "kubernetes: ... its pod names only resolve in the cluster: warnings, not errors")
    t.check(re.search(r"^watch_config = on$", text, re.M), "kubernetes: watch_config = on")
    n = int(sts["spec"]["replicas"])
    vport = sts["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    svc = sts["spec"]["serviceName"]
    want = {f"thumbs-{i}": f"http://thumbs-{i}.{svc}:{vport}" for i in range(n)}
    t.check(backends(text) == want, f"kubernetes: one backend per StatefulSet pod, by its stable name ({n})",
            backends(text))
    t.check(hsvc["spec"]["clusterIP"] == "None" and hsvc["spec"]["ports"][0]["port"] == vport and
            hsvc["spec"]["selector"] == sts["spec"]["template"]["metadata"]["labels"],
            "kubernetes: the headless Service gives each cache pod its DNS name")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    mount = c["volumeMounts"][0]
    vol = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    conf_path = c["args"][c["args"].index("-c") + 1]
    t.check(vol["configMap"]["name"] == "ringproxy" and "subPath" not in mount and
            conf_path == mount["mountPath"] + "/ringproxy.ini",
            "kubernetes: the ConfigMap is mounted as a directory (updates arrive) and is the -c file")
    admin = re.search(r"^admin_listen = \S+:(\d+)$", text, re.M).group(1)
    listen = re.search(r"^listen = \S+:(\d+)$", text, re.M).group(1)
    t.check(c["readinessProbe"]["httpGet"]["path"] == "/health" and
            c["readinessProbe"]["httpGet"]["port"] == admin and c["livenessProbe"]["tcpSocket"]["port"] == admin,
            "kubernetes: ready on the admin /health, alive while the admin listener answers")
    svc_rp = by[("Service", "ringproxy")]
    t.check(svc_rp["spec"]["ports"][0]["targetPort"] == listen and
            all(p["targetPort"] != admin for p in svc_rp["spec"]["ports"]),
            "kubernetes: the proxies' Service exposes the proxy port, not the admin port")
    vcm = by[("ConfigMap", "thumbs-vcl")]
    vc = sts["spec"]["template"]["spec"]["containers"][0]
    vcl_name = next(k for k in vcm["data"])
    t.check(vc["command"][vc["command"].index("-f") + 1] == vc["volumeMounts"][0]["mountPath"] + "/" + vcl_name
            and vc["command"][vc["command"].index("-a") + 1] == f":{vport}",
            "kubernetes: Varnish runs the VCL ConfigMap on the Service's port")
    if VARNISHD:
        vcl = os.path.join(tmp, "k8s.vcl")
        with open(vcl, "w") as f:
            # the origin must resolve when VCL compiles: point it here
            f.write(re.sub(r'\.host = "[^"]+";', '.host = "127.0.0.1";', vcm["data"][vcl_name]))
        p = subprocess.run([VARNISHD, "-C", "-j", "none", "-n", os.path.join(tmp, "varnish-c"), "-f", vcl],
                           capture_output=True, text=True, timeout=120)
        t.check(p.returncode == 0, "kubernetes: varnishd -C compiles the VCL", p.stderr[-2000:])
    else:
        t.skip("kubernetes: varnishd -C compiles the VCL", "no varnishd here")


def check_kubernetes_discovery(tmp):
    """docker/kubernetes-discovery.yaml: no [backend]; [discovery] srv is the
    SRV name the cluster DNS gives the StatefulSet's headless Service."""
    docs = miniyaml.load_all(open(os.path.join(ROOT, "docker", "kubernetes-discovery.yaml")).read())
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    cm, sts = by[("ConfigMap", "ringproxy")], by[("StatefulSet", "cache")]
    hsvc, dep = by[("Service", sts["spec"]["serviceName"])], by[("Deployment", "ringproxy")]
    text = cm["data"]["ringproxy.ini"]
    # the state file's directory is a volume of the pod (-t checks it is
    # there and writable): here, a directory of the test's own
    m = re.search(r"^state_file = (\S+)$", text, re.M)
    state_dir = os.path.dirname(m.group(1)) if m else None
    mounts = [v["mountPath"] for c in dep["spec"]["template"]["spec"]["containers"] for v in c.get("volumeMounts", [])]
    t.check(state_dir in mounts, f"kubernetes discovery: the state file's directory ({state_dir}) is a volume of the pod",
            mounts)
    local = os.path.join(tmp, "k8s-state")
    os.makedirs(local, exist_ok=True)
    path = os.path.join(tmp, "k8s-discovery.ini")
    with open(path, "w") as f:
        f.write(text.replace(f"state_file = {state_dir}/", f"state_file = {local}/") if state_dir else text)
    p = check_t(path, "kubernetes discovery: the ConfigMap's ringproxy.ini")
    port = hsvc["spec"]["ports"][0]
    ns = hsvc["metadata"]["namespace"]
    want = f"_{port['name']}._tcp.{hsvc['metadata']['name']}.{ns}.svc.cluster.local"
    t.check(re.search(rf"^srv = {re.escape(want)}$", text, re.M) and not backends(text) and
            "[discovery] srv" in p.stdout,
            f"kubernetes discovery: srv is the headless Service's SRV name ({want}), no [backend]", text)
    vc = sts["spec"]["template"]["spec"]["containers"][0]
    t.check(hsvc["spec"]["clusterIP"] == "None" and hsvc["spec"]["publishNotReadyAddresses"] in (True, "true") and
            port["port"] == vc["ports"][0]["containerPort"] and
            hsvc["spec"]["selector"] == sts["spec"]["template"]["metadata"]["labels"] and
            all(d["metadata"].get("namespace") == ns for d in docs if d["kind"] != "Namespace"),
            "kubernetes discovery: a headless Service with a named port over the StatefulSet, one namespace")
    state = re.search(r"^state_file = (\S+)$", text, re.M)
    c = dep["spec"]["template"]["spec"]["containers"][0]
    t.check(state and any(os.path.dirname(state.group(1)) == m["mountPath"] and not m.get("readOnly")
                          for m in c["volumeMounts"]),
            "kubernetes discovery: the state file (and the members kept beside it) on a writable volume")


def main():
    tmp = tempfile.mkdtemp(prefix="rp-deploy-")
    check_kubernetes(tmp)
    check_kubernetes_discovery(tmp)
    check_ansible(tmp)
    check_consul(tmp)
    shutil.rmtree(tmp, ignore_errors=True)


H.run_main(t, main)
