#!/usr/bin/python3
"""Conformance pass: every write the test suites made to the fake Kubernetes
API server, held to the Kubernetes OpenAPI schemas of kubernetes-models.

The fake appends every write it answers to
$PRISMLB_KUBE_REQUEST_LOG_DIR/PROGRAM.PID.writes (tests/fakes/kube/README.md):
one JSON line with the method, the path, the object the write carried (for a
PATCH the patched object) and the answer's status, with the Status when the
fake refused it. This script reads the logs of the test programs that start
the fake (meson's test list: the tests that depend on prismlb-fake-kube,
less the fake's own tests, which send refused writes on purpose), runs the
programs whose log is missing or older than their build, and fails when

  - kubernetes-models refuses an object a write carried (the schema of its
    kind: types, required fields, enums, formats), or
  - the fake refused a write with 400 or 422 (its decoding or validation,
    the rules the schemas do not express),

naming for each the suite and test, the request and the field.

Usage: conformance.py SOURCE_ROOT BUILD_ROOT
"""
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

FAKE = "prismlb-fake-kube"
# The fake's own tests refuse writes on purpose.
SELF_TESTS = ("test-fake-kube-",)


def tests_using_fake(build):
    with open(os.path.join(build, "meson-info", "intro-tests.json")) as f:
        tests = json.load(f)
    with open(os.path.join(build, "meson-info", "intro-targets.json")) as f:
        names = {t["id"]: t["name"] for t in json.load(f)}
    progs = collections.OrderedDict()
    for t in tests:
        if FAKE not in [names.get(d) for d in t["depends"]]:
            continue
        exe = t["cmd"][0]
        base = os.path.basename(exe)
        if base.startswith(SELF_TESTS) or not exe.startswith(build):
            continue
        progs.setdefault(base, {"exe": exe, "tests": []})["tests"].append(t)
    return progs


def fresh_logs(logdir, base, since):
    return sorted(f for f in glob.glob(os.path.join(logdir, base + ".*.writes"))
                  if os.path.getmtime(f) >= since)


def test_of(prog, args):
    """The suite:test that ran the program with these arguments (the fake logs
    its parent's), or all of the program's when they do not say."""
    tests = [t for t in prog["tests"] if args is not None and t["cmd"][1:] == args] or prog["tests"]
    return ", ".join(f"{'/'.join(s.split(':')[-1] for s in t['suite'])}:{t['name']}" for t in tests)


def run_tests(prog, build):
    for t in prog["tests"]:
        env = dict(os.environ)
        env.update(t.get("env") or {})
        print(f"running {t['name']} for its write log", flush=True)
        p = subprocess.run(t["cmd"], cwd=t.get("workdir") or build, env=env,
                           capture_output=True, text=True, timeout=max(60, t["timeout"]))
        if p.returncode != 0:
            print(p.stdout[-4000:] + p.stderr[-4000:])
            print(f"FAIL: {t['name']} failed (its writes are still checked)")


def main():
    src, build = sys.argv[1:3]
    logdir = os.environ.get("PRISMLB_KUBE_REQUEST_LOG_DIR") or os.path.join(build, "kube-requests")
    os.environ["PRISMLB_KUBE_REQUEST_LOG_DIR"] = logdir
    node_modules = os.path.join(src, ".tools", "npm", "node_modules")
    if not os.path.exists(os.path.join(node_modules, "kubernetes-models")):
        print("SKIP: kubernetes-models missing (run tests/setup.sh test)")
        return 77
    fake = os.path.join(build, "tests", "fakes", "kube", FAKE)
    progs = tests_using_fake(build)
    if not progs:
        print("FAIL: no test program starts the fake API server")
        return 1

    writes = []  # (program, suites/tests, file, line number, entry)
    for base, prog in progs.items():
        since = max(os.path.getmtime(prog["exe"]), os.path.getmtime(fake))
        logs = fresh_logs(logdir, base, since)
        if not logs:
            run_tests(prog, build)
            logs = fresh_logs(logdir, base, since)
        if not logs:
            # Built with the fake but never starting it (a config check).
            print(f"note: {base} started no fake API server")
            continue
        for f in logs:
            with open(f) as fh:
                for n, line in enumerate(fh, 1):
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue  # a line cut by a killed fake
                    writes.append((base, test_of(prog, e.get("args")), os.path.basename(f), n, e))

    # Identical objects are validated once.
    uniq, index = [], {}
    for i, (_, _, _, _, e) in enumerate(writes):
        key = json.dumps(e.get("object"), sort_keys=True)
        if key not in index:
            index[key] = len(uniq)
            uniq.append({"id": len(uniq), "object": e.get("object")})
        writes[i] = writes[i] + (index[key],)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tf:
        json.dump(uniq, tf)
    try:
        p = subprocess.run(["node", os.path.join(src, "tests", "conformance", "validate_writes.mjs"),
                            node_modules, tf.name], capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(tf.name)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
        print("FAIL: validate_writes.mjs did not run")
        return 1
    refused = {r["id"]: r["errors"] for r in json.loads(p.stdout)}

    bad = 0
    per_prog = collections.Counter()
    for base, who, fname, n, e, oid in writes:
        per_prog[base] += 1
        req = f"{e.get('method')} {e.get('path')} -> {e.get('status')}"
        where = f"{who} ({fname} line {n})"
        for err in refused.get(oid, []):
            bad += 1
            print(f"REFUSED by the schema: {where}: {req}: {err['path'] or '(object)'}: {err['message']}")
        ans = e.get("answer") or {}
        if e.get("status") in (400, 422) and ans.get("reason") in ("BadRequest", "Invalid"):
            causes = (ans.get("details") or {}).get("causes") or [{"field": "", "message": ans.get("message")}]
            for c in causes:
                bad += 1
                print(f"REFUSED by the fake: {where}: {req}: {c.get('field') or '(object)'}: {c.get('message')}")
    for base in progs:
        print(f"  {per_prog[base]:6d} writes  {base}")
    if not writes:
        print("FAIL: no write was logged")
        return 1
    print(f"{len(writes)} writes ({len(uniq)} distinct objects) from {len(progs)} programs, "
          f"{bad} refused")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
