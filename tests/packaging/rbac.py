#!/usr/bin/python3
"""RBAC coverage: every (verb, group, resource) that a role's end-to-end
suites made against the fake API server is granted by the rules the role's
chart renders, and every grant nobody used is reported.

The fake API server appends each request to
$PRISMLB_KUBE_REQUEST_LOG_DIR/PROGRAM.PID.jsonl (tests/fakes/kube/README.md);
requests whose User-Agent starts with "prismlb/" are the daemon's (test
clients such as kubectl, the Python client and the writer test module use
their own). Logs older than the build of the daemon, the role's modules or
the test program are ignored; a test program without a fresh log is run
here first (meson runs this test last, after the suites).

Usage: rbac.py SOURCE_ROOT BUILD_ROOT proxy|reconciler
"""
import glob
import json
import os
import subprocess
import sys
import urllib.parse

import yaml

ROLES = {
    "proxy": {
        "modules": ["endpoint_watch", "tcp_proxy", "metrics"],
        "programs": {
            "tests/e2e/endpoint_watch/test_endpoint_watch_discovery": [],
            "tests/e2e/endpoint_watch/test_endpoint_watch_faults": [],
            "tests/e2e/endpoint_watch/test_endpoint_watch_proxy": [],
            "tests/e2e/tcp_proxy/test_tcp_proxy_kube": [],
        },
        "values": "proxy-static.yaml",
    },
    "reconciler": {
        "modules": ["leader", "hetzner_lb", "metrics"],
        "programs": {
            "tests/e2e/hetzner_lb/test_hetzner_lb_daemon": [],
            "tests/e2e/hetzner_lb/test_hetzner_lb_reconcile": [],
            "tests/e2e/hetzner_lb/test_hetzner_lb_replicas": [],
            "tests/e2e/leader/test_leader_kubectl": ["root"],
            "tests/e2e/leader/test_leader_chaos": None,  # read when present, never run here
        },
        "values": "reconciler-token.yaml",
    },
}
NAMESPACE = "prismlb-system"


def request_key(method, uri):
    """(verb, group, resource) of one API request, or None for a
    non-resource path."""
    u = urllib.parse.urlsplit(uri)
    q = urllib.parse.parse_qs(u.query)
    parts = [p for p in u.path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "clusters":
        parts = parts[2:]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    if sub:
        resource += "/" + sub
    watch = q.get("watch", [""])[0] in ("1", "true")
    verb = {
        "GET": "watch" if watch else ("get" if name else "list"),
        "POST": "create", "PUT": "update", "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }.get(method)
    return (verb, group, resource) if verb else None


def grants(objs, sa):
    """(verb, group, resource, kind/name) for every rule bound to the service account."""
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objs if o["kind"] in ("ClusterRole", "Role")}
    out = []
    for b in objs:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
                   and s.get("namespace") == NAMESPACE for s in b.get("subjects", [])):
            continue
        ref = b["roleRef"]
        role = roles.get((ref["kind"], ref["name"]))
        if not role:
            continue
        for r in role.get("rules", []):
            for g in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    for v in r.get("verbs", []):
                        out.append((v, g, res, f"{role['kind']}/{role['metadata']['name']}"))
    return out


def allowed(key, rules):
    v, g, res = key
    return any((rv in (v, "*")) and (rg in (g, "*")) and (rr in (res, "*")) for rv, rg, rr, _ in rules)


def main():
    src, build, role = sys.argv[1:4]
    cfg = ROLES[role]
    logdir = os.environ.get("PRISMLB_KUBE_REQUEST_LOG_DIR") or os.path.join(build, "kube-requests")
    os.environ["PRISMLB_KUBE_REQUEST_LOG_DIR"] = logdir
    os.environ.setdefault("PRISMLB_BUILD_ROOT", build)
    os.environ.setdefault("PRISMLB_SOURCE_ROOT", src)
    helm = os.path.join(src, ".tools", "bin", "helm")
    if not os.path.exists(helm):
        print("SKIP: helm missing (run tests/setup.sh test)")
        return 77
    built = max(os.path.getmtime(p) for p in
                [os.path.join(build, "core", "prismlb")] +
                [os.path.join(build, "modules", "mod_" + m, "mod_" + m + ".so") for m in cfg["modules"]])

    used = {}
    for prog, args in cfg["programs"].items():
        exe = os.path.join(build, prog)
        if not os.path.exists(exe):
            print(f"FAIL: {prog} is not built")
            return 1
        since = max(built, os.path.getmtime(exe))
        base = os.path.basename(exe)

        def fresh():
            return [f for f in glob.glob(os.path.join(logdir, base + ".*.jsonl")) if os.path.getmtime(f) >= since]

        logs = fresh()
        if not logs and args is not None:
            print(f"running {prog} {' '.join(args)} for its request log", flush=True)
            p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=900)
            if p.returncode != 0:
                print(p.stdout + p.stderr)
                print(f"FAIL: {prog} failed")
                return 1
            logs = fresh()
        if not logs and args is not None:
            print(f"FAIL: {prog} left no request log in {logdir}")
            return 1
        for f in logs:
            with open(f) as fh:
                for line in fh:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if not e.get("userAgent", "").startswith("prismlb/"):
                        continue
                    k = request_key(e["method"], e["path"])
                    if k is None:
                        k = ("nonResourceURL", "", urllib.parse.urlsplit(e["path"]).path)
                    used.setdefault(k, set()).add(base)

    vals = os.path.join(src, "tests", "packaging", "values", cfg["values"])
    p = subprocess.run([helm, "template", "prismlb", os.path.join(src, "charts", "prismlb-" + role),
                        "--namespace", NAMESPACE, "-f", vals], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
        return 1
    objs = [d for d in yaml.safe_load_all(p.stdout) if d]
    sa = next(o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount")
    rules = grants(objs, sa)

    missing = 0
    print(f"{role}: requests the daemon made in the end-to-end suites, and the grant that allows each:")
    for k in sorted(used):
        ok = allowed(k, rules)
        missing += not ok
        who = ", ".join(sorted(used[k]))
        print(f"  {'ok     ' if ok else 'MISSING'} {k[0]:<16} {k[1] or 'core':<22} {k[2]:<20} ({who})")
    unused = sorted({(v, g, r, where) for v, g, r, where in rules if not any(
        (v in (k[0], "*")) and (g in (k[1], "*")) and (r in (k[2], "*")) for k in used)})
    print(f"{role}: grants no end-to-end request used:")
    for v, g, r, where in unused:
        print(f"  unused  {v:<16} {g or 'core':<22} {r:<20} ({where})")
    if not used:
        print("FAIL: no request of the daemon in the logs")
        return 1
    print(f"{len(used)} (verb, group, resource) used, {missing} not granted, {len(unused)} grants unused")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
