#!/usr/bin/env python3
"""Discovery latency: EndpointSlice write at the fake -> proxy routing table.

The daemon runs an endpoint_watch instance (kubeconfig to the fake API
server, HTTPS with a client certificate) and a tcp_proxy following it. Each
run replaces the slice's second address by a new one (PUT at the fake);
the latency is from just before the PUT is sent to the timestamp of
mod_tcp_proxy's log line "upstream <new> added" (the pool, i.e. the routing
table, took it), and likewise to "upstream <old> removed: draining". The
daemon stamps its log lines in ms of wall-clock time on this host.

Usage: bench.py BUILD_DIR [RUNS]   (see run.sh)
"""
import datetime
import json
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

PORT = 16443  # the API servers' port in the slice (nothing needs to listen)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.0005)
    raise SystemExit("timed out waiting for " + what)


def log_ts(log_path, needle):
    """Wall-clock seconds of the first log line containing needle, or None."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if needle in line:
                m = re.match(r"ts=(\S+)Z ", line)
                if m:
                    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
                    return t.replace(tzinfo=datetime.timezone.utc).timestamp()
    return None


def main():
    build = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    d = tempfile.mkdtemp(prefix="ew-bench-")
    fake = daemon = None
    try:
        state = os.path.join(d, "state")
        fake = subprocess.Popen(
            [os.path.join(build, "tests/fakes/kube/prismlb-fake-kube"), "--tls-dir", d,
             "--state-file", state],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(state) and "ready" in open(state).read(), 10,
                 "the fake API server")
        server = re.search(r"server 0 (\S+)", open(state).read()).group(1)
        admin = re.search(r"admin (\S+)", open(state).read()).group(1)
        kc = os.path.join(d, "kubeconfig")
        with open(kc, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- cluster: {{certificate-authority: {d}/ca.crt, server: "{server}"}}
  name: fake
contexts:
- context: {{cluster: fake, user: me}}
  name: fake
current-context: fake
users:
- name: me
  user: {{client-certificate: {d}/client.crt, client-key: {d}/client.key}}
""")
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        ctx.load_cert_chain(os.path.join(d, "client.crt"), os.path.join(d, "client.key"))
        base = server + "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"

        def put_slice(addrs, create=False):
            body = json.dumps({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "kubernetes", "namespace": "default",
                             "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addrs],
                "ports": [{"name": "https", "port": PORT, "protocol": "TCP"}],
            }).encode()
            req = urllib.request.Request(base if create else base + "/kubernetes", data=body,
                                         method="POST" if create else "PUT",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                r.read()

        put_slice(["127.0.0.11"], create=True)
        pport = free_port()
        conf = os.path.join(d, "prismlb.conf")
        with open(conf, "w") as f:
            f.write(f"""log_level = "info";
instances = (
  {{ module = "endpoint_watch"; name = "ew"; endpoints = ["127.0.0.10:{PORT}"];
    kubeconfig = "{kc}"; }},
  {{ module = "tcp_proxy"; name = "kubeprism"; upstreams = ["ew"];
    bind_address = "127.0.0.1"; bind_port = {pport}; drain_timeout = "0"; }}
);
""")
        log = os.path.join(d, "prismlb.log")
        env = dict(os.environ, PRISMLB_MODULE_PATH=os.path.join(build, "modules"))
        with open(log, "w") as lf:
            daemon = subprocess.Popen([os.path.join(build, "core/prismlb"), "--config", conf],
                                      stdout=lf, stderr=lf, env=env)
        wait_for(lambda: log_ts(log, f"upstream 127.0.0.11:{PORT} added"), 10,
                 "the first discovered upstream")
        added, removed, added_at = [], [], []
        prev = None
        for i in range(runs):
            new = f"127.0.1.{i + 1}"
            time.sleep(0.05)  # a quiet loop between changes
            t0 = time.time()
            put_slice(["127.0.0.11", new])
            ta = wait_for(lambda: log_ts(log, f"upstream {new}:{PORT} added"), 5,
                          f"{new} in the routing table")
            added.append((ta - t0) * 1000)
            added_at.append(ta)
            if prev:
                tr = wait_for(lambda: log_ts(log, f"upstream {prev}:{PORT} removed"), 5,
                              f"{prev} out of the routing table")
                removed.append((tr - t0) * 1000)
            prev = new

        # The fake's arrival time of each PUT (after the client's TLS
        # handshake): the write as the API server sees it.
        with urllib.request.urlopen(admin + "/requests", timeout=10) as r:
            items = json.load(r)["items"]
        puts = [e["time"] for e in items if e["method"] == "PUT" and "endpointslices" in e["path"]]
        from_fake = [(a - p) * 1000 for a, p in zip(added_at, puts[-runs:])]

        def show(name, v):
            v = sorted(v)
            p90 = v[max(0, int(len(v) * 0.9) - 1)]
            print(f"{name:8} n={len(v):3}  median {statistics.median(v):6.1f} ms  "
                  f"p90 {p90:6.1f} ms  min {v[0]:6.1f} ms  max {v[-1]:6.1f} ms")

        print("EndpointSlice write -> tcp_proxy routing table "
              "(log timestamps have 1 ms resolution)")
        print("from the client sending the PUT (includes its TLS handshake):")
        show("added", added)
        show("removed", removed)
        print("from the PUT's arrival at the fake (its request log):")
        show("added", from_fake)
    finally:
        for p in (daemon, fake):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
