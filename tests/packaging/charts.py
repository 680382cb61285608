#!/usr/bin/python3
"""Checks a Helm chart of prismlb with the real tools that consume it.

For the chart's default values and each value set tests/packaging/values/
ROLE-*.yaml: `helm lint --strict`; `helm template` objects validated against
the Kubernetes OpenAPI schemas (kubernetes-models, validate.mjs); the
libconfig file of the ConfigMap passes `prismlb --check-config` with the
role's modules and the container's environment; the pods' checksum
annotation is the config's; PrometheusRule groups pass `promtool check
rules`; the dashboard is JSON whose queries name only metrics prismlb
exports; the workload keeps the security settings the issue fixes.

Usage: charts.py SOURCE_ROOT BUILD_ROOT proxy|reconciler
Exit 0 when every check passes, 1 otherwise (each failure printed), 77
when a tool is missing (tests/setup.sh installs them).
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

ROLES = {
    "proxy": {"modules": ["endpoint_watch", "tcp_proxy", "metrics"], "workload": "DaemonSet"},
    "reconciler": {"modules": ["leader", "hetzner_lb", "metrics"], "workload": "Deployment"},
}
NAMESPACE = "prismlb-system"

failures = []


def fail(what):
    failures.append(what)
    print("FAIL " + what, flush=True)


def run(argv, env=None, stdin=None):
    p = subprocess.run(argv, capture_output=True, text=True, env=env, input=stdin, timeout=120)
    return p.returncode, p.stdout + p.stderr


def exported_metrics(src):
    """Metric family names the modules' READMEs document."""
    names = set()
    for readme in glob.glob(os.path.join(src, "modules", "*", "README.md")):
        with open(readme) as f:
            names.update(re.findall(r"`(prismlb_[a-z_]+)", f.read()))
    return names


def container_env(workload):
    """The environment the container would get; Secret references become
    placeholders. Secrets named by envFrom are taken to carry
    ROBOTLB_HCLOUD_TOKEN, as robotlb's chart documents existingSecrets."""
    c = workload["spec"]["template"]["spec"]["containers"][0]
    env = {}
    for e in c.get("env", []) or []:
        env[e["name"]] = e.get("value", "placeholder-from-" + "-".join(e.get("valueFrom", {}).keys()))
    if c.get("envFrom"):
        env.setdefault("ROBOTLB_HCLOUD_TOKEN", "placeholder-from-envFrom")
    return env


def check_security(role, label, w, custom_security):
    spec = w["spec"]["template"]["spec"]
    c = spec["containers"][0]
    if not custom_security:
        sc, psc = c.get("securityContext", {}), spec.get("securityContext", {})
        want = {"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": True,
                "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
        for k, v in want.items():
            if sc.get(k) != v:
                fail(f"{label}: container securityContext.{k} is {sc.get(k)!r}, want {v!r}")
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            fail(f"{label}: capabilities.drop is not [ALL]")
        if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            fail(f"{label}: seccompProfile is not RuntimeDefault")
    if not c.get("resources", {}).get("limits") and not custom_security:
        fail(f"{label}: no resource limits")
    if role == "proxy":
        for k, v in {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet",
                     "priorityClassName": "system-node-critical"}.items():
            if spec.get(k) != v:
                fail(f"{label}: {k} is {spec.get(k)!r}, want {v!r}")
        if {"operator": "Exists"} not in spec.get("tolerations", []):
            fail(f"{label}: no toleration operator: Exists")
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            if c.get(probe, {}).get("httpGet", {}).get("path") != path:
                fail(f"{label}: {probe} is not {path}")
        if w["spec"]["updateStrategy"]["type"] != "RollingUpdate":
            fail(f"{label}: update strategy is not RollingUpdate")
    else:
        aff = spec.get("affinity", {})
        if "podAntiAffinity" not in aff and not spec.get("topologySpreadConstraints"):
            fail(f"{label}: neither anti-affinity nor topology spread")


def check_set(src, build, role, chart, values, node_modules, metrics):
    label = f"{role} {os.path.basename(values) if values else 'defaults'}"
    vargs = ["-f", values] if values else []
    helm = os.path.join(src, ".tools", "bin", "helm")
    rc, out = run([helm, "lint", "--strict", chart] + vargs)
    if rc != 0:
        fail(f"{label}: helm lint --strict:\n{out}")
    else:
        print(f"ok   {label}: helm lint --strict")
    if not values:
        return  # install and template need the endpoints or the token
    rc, out = run([helm, "template", "prismlb", chart, "--namespace", NAMESPACE] + vargs)
    if rc != 0:
        fail(f"{label}: helm template:\n{out}")
        return
    objs = [d for d in yaml.safe_load_all(out) if d]
    with tempfile.TemporaryDirectory(prefix="pkgchart-") as tmp:
        jf = os.path.join(tmp, "objects.json")
        with open(jf, "w") as f:
            json.dump(objs, f)
        rc, out = run(["node", os.path.join(src, "tests", "packaging", "validate.mjs"), node_modules, jf])
        print(out, end="")
        if rc != 0:
            fail(f"{label}: objects invalid against the Kubernetes schemas")

        cms = [o for o in objs if o["kind"] == "ConfigMap" and "prismlb.conf" in o.get("data", {})]
        works = [o for o in objs if o["kind"] == ROLES[role]["workload"]]
        if len(cms) != 1 or len(works) != 1:
            fail(f"{label}: want one config ConfigMap and one {ROLES[role]['workload']}")
            return
        conf = cms[0]["data"]["prismlb.conf"]
        w = works[0]
        cf = os.path.join(tmp, "prismlb.conf")
        with open(cf, "w") as f:
            f.write(conf)
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("ROBOTLB_") or k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
                del env[k]
        env.update(container_env(w))
        env["PRISMLB_MODULE_PATH"] = ":".join(
            os.path.join(build, "modules", "mod_" + m) for m in ROLES[role]["modules"])
        rc, out = run([os.path.join(build, "core", "prismlb"), "--check-config", "-c", cf], env=env)
        if rc != 0 or out.strip() != "OK":
            fail(f"{label}: rendered config fails --check-config:\n{out}\n--- config:\n{conf}")
        else:
            print(f"ok   {label}: rendered config passes --check-config")
        mods = re.findall(r'module = "([a-z_]+)"', conf)
        if sorted(mods) != sorted(ROLES[role]["modules"]):
            fail(f"{label}: config instances {mods}, want the role's modules")
        ann = w["spec"]["template"]["metadata"].get("annotations", {}).get("checksum/config")
        if ann != hashlib.sha256(conf.rstrip("\n").encode()).hexdigest():
            fail(f"{label}: checksum/config annotation is not the config's sha256")
        args = w["spec"]["template"]["spec"]["containers"][0].get("args", [])
        if args != ["--config", "/etc/prismlb/prismlb.conf"]:
            fail(f"{label}: container args {args}")
        check_security(role, label, w, "robotlb" in label)

        for o in objs:
            if o["kind"] == "PrometheusRule":
                rf = os.path.join(tmp, "rules.yaml")
                with open(rf, "w") as f:
                    yaml.safe_dump(o["spec"], f)
                rc, out = run(["promtool", "check", "rules", rf])
                if rc != 0:
                    fail(f"{label}: promtool check rules:\n{out}")
                else:
                    print(f"ok   {label}: promtool check rules")
                # The alerts evaluated over series named and labelled as
                # the modules export them (tests/packaging/rules-ROLE.test.yaml).
                tf = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"rules-{role}.test.yaml")
                if os.path.exists(tf):
                    tcopy = os.path.join(tmp, "rules.test.yaml")
                    with open(tf) as f, open(tcopy, "w") as g:
                        g.write(f.read())
                    rc, out = run(["promtool", "test", "rules", tcopy])
                    if rc != 0:
                        fail(f"{label}: promtool test rules:\n{out}")
                    else:
                        print(f"ok   {label}: promtool test rules")
                for g in o["spec"]["groups"]:
                    for r in g["rules"]:
                        for m in set(re.findall(r"prismlb_[a-z_]+", r["expr"])) - metrics:
                            fail(f"{label}: rule {r['alert']} uses {m}, which no module exports")
            if o["kind"] == "ConfigMap" and "prismlb.json" in o.get("data", {}):
                try:
                    dash = json.loads(o["data"]["prismlb.json"])
                except ValueError as e:
                    fail(f"{label}: dashboard is not JSON: {e}")
                    continue
                exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
                used = set(m for e in exprs for m in re.findall(r"prismlb_[a-z_]+", e))
                for m in used - metrics:
                    fail(f"{label}: dashboard queries {m}, which no module exports")
                print(f"ok   {label}: dashboard, {len(exprs)} queries over {len(used)} metrics")


def main():
    src, build, role = sys.argv[1:4]
    chart = os.path.join(src, "charts", "prismlb-" + role)
    node_modules = os.path.join(src, ".tools", "npm", "node_modules")
    for tool in (os.path.join(src, ".tools", "bin", "helm"), os.path.join(node_modules, "kubernetes-models")):
        if not os.path.exists(tool):
            print(f"SKIP: {tool} missing (run tests/setup.sh test)")
            return 77
    metrics = exported_metrics(src)
    # One dashboard for both roles, shipped in each chart.
    dashes = [open(os.path.join(src, "charts", c, "files", "dashboard.json")).read()
              for c in ("prismlb-proxy", "prismlb-reconciler")]
    if dashes[0] != dashes[1]:
        fail("the two charts' files/dashboard.json differ")
    sets = sorted(glob.glob(os.path.join(src, "tests", "packaging", "values", role + "-*.yaml")))
    if len(sets) < 3:
        fail(f"{role}: fewer than three value sets")
    for values in [None] + sets:
        check_set(src, build, role, chart, values, node_modules, metrics)
    # A changed setting rolls the pods: the checksum follows the config.
    helm = os.path.join(src, ".tools", "bin", "helm")
    sums = []
    for extra in ([], ["--set", "logLevel=debug"]):
        rc, out = run([helm, "template", "prismlb", chart, "-f", sets[0], "--show-only",
                       f"templates/{ROLES[role]['workload'].lower()}.yaml"] + extra)
        sums.append(re.findall(r"checksum/config: (\w+)", out))
    if not sums[0] or sums[0] == sums[1]:
        fail(f"{role}: the checksum annotation does not change with the config")
    print(f"{len(failures)} failed" if failures else f"all checks passed ({1 + len(sets)} value sets)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
