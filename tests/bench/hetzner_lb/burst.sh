#!/bin/sh
# A burst of N LoadBalancer Services (default 200) created together on 3
# nodes: the status writes the daemon sends to the API server (from the
# fake's request log: count per Service, failures), and how long after the
# last balancer existed every status showed its IP.
# Usage: tests/bench/hetzner_lb/burst.sh BUILD_DIR [N]
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [N]}" && pwd)
n=${2:-200}
work=$(mktemp -d)
. "$(dirname "$0")/fakes.sh"

write_seed $((n + 10)) 10.0.0.0/16 10.0.8.0/22
start_fakes
start_daemon info 'resync_interval = "300s"; dynamic_node_selector = true;
  default_network = "k8s";'
python3 - "$work" "$kube" "$base" "$kadmin" "$n" <<'PY'
import sys, time
from fakes import Hetzner, Kube
work, kube, base, kadmin, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
kc, hz = Kube(work + "/tls", kube, kadmin), Hetzner(base)
for i in range(3):
    kc.ready_node("n%d" % i, "10.0.8.%d" % (10 + i))
time.sleep(2)
kc.admin("DELETE", "/requests")
# the burst, through the bulk endpoint: all of them at once
kc.bulk(op="create", resource="services", count=n, namePrefix="b", namespace="default",
        template={"apiVersion": "v1", "kind": "Service",
                  "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})
t0 = time.time()
t_lbs = None
while time.time() - t0 < 600:
    st = hz.admin("GET", "/_admin/state")
    if t_lbs is None and sum(1 for lb in st["load_balancers"] if len(lb.get("targets", [])) == 3) == n:
        t_lbs = time.time()
    if kc.services_with_ingress() == n:
        break
    time.sleep(0.2)
t_status = time.time()
time.sleep(3)
log = kc.admin("GET", "/requests")["items"]
writes = [e for e in log if e["method"] in ("PUT", "PATCH") and e["path"].split("?")[0].endswith("/status")
          and "/services/" in e["path"]]
bad = [e for e in writes if e["status"] >= 300]
print("services                        %d (3 nodes, Cluster)" % n)
print("balancers with 3 targets after  %.1f s" % ((t_lbs or t_status) - t0))
print("statuses complete after         %.1f s (%.1f s after the last balancer)" % (t_status - t0,
      t_status - (t_lbs or t_status)))
print("status writes                   %d (%.2f per Service), failed %d" % (len(writes), len(writes) / n, len(bad)))
PY
