#!/usr/bin/python3
"""packaging/static-pod: the Pod validates against the Kubernetes schemas
(kubernetes-models), keeps the proxy role's security settings, mounts the
node's config where the image's entrypoint reads it, and that config
(proxy.conf beside it) passes `prismlb --check-config` with the proxy
role's modules.

Usage: staticpod.py SOURCE_ROOT BUILD_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

import yaml


def main():
    src, build = sys.argv[1:3]
    d = os.path.join(src, "packaging", "static-pod")
    node_modules = os.path.join(src, ".tools", "npm", "node_modules")
    if not os.path.exists(os.path.join(node_modules, "kubernetes-models")):
        print("SKIP: kubernetes-models missing (run tests/setup.sh test)")
        return 77
    with open(os.path.join(d, "prismlb-proxy.yaml")) as f:
        objs = [o for o in yaml.safe_load_all(f) if o]
    bad = []
    with tempfile.TemporaryDirectory(prefix="pkgpod-") as tmp:
        jf = os.path.join(tmp, "objects.json")
        with open(jf, "w") as f:
            json.dump(objs, f)
        p = subprocess.run(["node", os.path.join(src, "tests", "packaging", "validate.mjs"), node_modules, jf],
                           capture_output=True, text=True, timeout=120)
        print(p.stdout + p.stderr, end="")
        if p.returncode:
            bad.append("schema validation")
    pod = objs[0]
    spec = pod["spec"]
    c = spec["containers"][0]
    sc = c["securityContext"]
    checks = {
        "kind Pod": pod["kind"] == "Pod",
        "hostNetwork": spec.get("hostNetwork") is True,
        "system-node-critical": spec.get("priorityClassName") == "system-node-critical",
        "UID 65534, non-root": sc.get("runAsUser") == 65534 and sc.get("runAsNonRoot") is True,
        "read-only root": sc.get("readOnlyRootFilesystem") is True,
        "no privilege escalation": sc.get("allowPrivilegeEscalation") is False,
        "capabilities drop ALL": sc.get("capabilities", {}).get("drop") == ["ALL"],
        "seccomp RuntimeDefault": spec["securityContext"].get("seccompProfile", {}).get("type") == "RuntimeDefault",
        "probes on 127.0.0.1": all(c[p]["httpGet"].get("host") == "127.0.0.1" for p in ("livenessProbe", "readinessProbe")),
        "config mounted at the entrypoint's path": any(
            m["mountPath"] == "/etc/prismlb/prismlb.conf" for m in c.get("volumeMounts", []))
            and c.get("args") == ["--config", "/etc/prismlb/prismlb.conf"],
    }
    for name, ok in checks.items():
        print(("ok   " if ok else "FAIL ") + name)
        if not ok:
            bad.append(name)
    env = dict(os.environ)
    env["PRISMLB_MODULE_PATH"] = ":".join(os.path.join(build, "modules", "mod_" + m)
                                          for m in ("endpoint_watch", "tcp_proxy", "metrics"))
    for k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        env.pop(k, None)
    p = subprocess.run([os.path.join(build, "core", "prismlb"), "--check-config", "-c",
                        os.path.join(d, "proxy.conf")], capture_output=True, text=True, env=env, timeout=60)
    if p.returncode or p.stdout.strip() != "OK":
        print("FAIL proxy.conf --check-config:\n" + p.stdout + p.stderr)
        bad.append("check-config")
    else:
        print("ok   proxy.conf passes --check-config")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
