#!/bin/sh
# Steady state of mod_hetzner_lb in a large cluster: S Services (default
# 10000) of which L are LoadBalancer (default 200), N nodes (default 500)
# sending a status heartbeat every 10 s (N/10 updates a second), E
# EndpointSlices (default 2000, of ClusterIP Services) of which 20 change
# every second. Once every balancer converged, reports over W seconds
# (default 60) the daemon's CPU (share of one core, from /proc/PID/stat),
# the Hetzner requests the churn caused, and the daemon's RSS (anonymous and
# file-backed apart) with each informer's object count.
# SHARED=K (default 0: none) makes the L LoadBalancer Services members of K
# shared groups (prismlb.io/shared-balancer, member i in group i mod K with
# port 1000 + i div K), so K balancers of L/K services each (lb31 holds 30:
# L/K at most 30); RESYNC=SECONDS (default 300) sets resync_interval, so
# that a window longer than it counts the resync lists, reported per
# Service.
# Usage: [SHARED=K] [RESYNC=S] tests/bench/hetzner_lb/steady.sh BUILD_DIR [S] [L] [N] [E] [W]
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [S] [L] [N] [E] [W]}" && pwd)
s=${2:-10000}
l=${3:-200}
n=${4:-500}
e=${5:-2000}
w=${6:-60}
shared=${SHARED:-0}
resync=${RESYNC:-300}
work=$(mktemp -d)
. "$(dirname "$0")/fakes.sh"

write_seed $((l + 10)) 10.0.0.0/8 10.8.0.0/16
start_fakes
start_daemon warn "resync_interval = \"${resync}s\"; dynamic_node_selector = true;
  default_network = \"k8s\"; default_balancer_type = \"lb31\";"
python3 - "$work" "$kube" "$base" "$kadmin" "$s" "$l" "$n" "$e" "$w" "$d_pid" "$shared" <<'PY'
import sys, time
from fakes import Hetzner, Kube, cpu_seconds, memory
work, kube, base, kadmin = sys.argv[1:5]
s, l, n, e, w = (int(x) for x in sys.argv[5:10])
pid, shared = sys.argv[10], int(sys.argv[11])
kc, hz = Kube(work + "/tls", kube, kadmin), Hetzner(base)

t0 = time.time()
for i in range(n):
    kc.ready_node("n%06d" % i, "10.8.%d.%d" % (i // 250, 10 + i % 250))
kc.bulk(op="create", resource="services", count=s - l, namePrefix="c", namespace="default",
        template={"spec": {"type": "ClusterIP", "selector": {"app": "c"}, "ports": [{"port": 80}]}})
eps = [{"addresses": ["10.244.%d.%d" % (j, 10 + j)], "nodeName": "n%06d" % j,
        "conditions": {"ready": True}} for j in range(10)]
kc.bulk(op="create", resource="endpointslices", count=e, namePrefix="c", namespace="default",
        template={"metadata": {"labels": {"kubernetes.io/service-name": "c000000"}},
                  "addressType": "IPv4", "endpoints": eps, "ports": [{"port": 80, "protocol": "TCP"}]})
if shared:
    for i in range(l):
        kc.k("POST", "/api/v1/namespaces/default/services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "lb%06d" % i,
                         "annotations": {"prismlb.io/shared-balancer": "g%03d" % (i % shared)}},
            "spec": {"type": "LoadBalancer",
                     "ports": [{"port": 1000 + i // shared, "protocol": "TCP"}]}})
else:
    kc.bulk(op="create", resource="services", count=l, namePrefix="lb", namespace="default",
            template={"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}})
t_made = time.time() - t0

def converged():
    st = hz.admin("GET", "/_admin/state")
    if not shared:
        return sum(1 for b in st["load_balancers"] if len(b.get("targets", [])) > 0
                   and len(b.get("services", [])) == 1)
    # members whose group's balancer has every member's service
    want = {"g%03d" % g: len(range(g, l, shared)) for g in range(shared)}
    return sum(want[g] for b in st["load_balancers"]
               for g in [b.get("labels", {}).get("prismlb.io/shared-balancer")]
               if g in want and len(b.get("targets", [])) > 0
               and len(b.get("services", [])) == want[g])
done = 0
while time.time() - t0 < 1800:
    done = converged()
    if done == l: break
    time.sleep(2)
t_conv = time.time() - t0

# steady state: heartbeats (n/10 node updates a second) and 20 slice changes a second
hz.admin("POST", "/_admin/reset")
c0, w0, hb, sl = cpu_seconds(pid), time.time(), 0, 0
tick = 0
while time.time() - w0 < w:
    nb = max(1, n // 10)
    kc.bulk(op="update", resource="nodes", count=nb, start=(tick * nb) % n, namePrefix="n")
    for _ in range(2):  # two bursts of 10 each second
        kc.bulk(op="update", resource="endpointslices", count=10, start=(sl % e), namePrefix="c",
             namespace="default")
        sl += 10
        time.sleep(0.5)
    hb += nb
    tick += 1
c1, w1 = cpu_seconds(pid), time.time()
req = hz.admin("GET", "/_admin/requests")
rss, anon, filed = memory(pid)
print("services / LoadBalancer / nodes / slices  %d / %d / %d / %d" % (s, l, n, e))
print("shared groups                   %d%s" % (shared, " (%d members each)" % (l // shared)
                                                  if shared else ""))
print("objects created in              %.1f s" % t_made)
print("%s converged  %d in %.1f s" % ("members (shared)     " if shared else
                                     "balancers            ", done, t_conv))
print("steady window                   %.0f s: %d node updates, %d slice updates" % (w1 - w0, hb, sl))
print("daemon CPU                      %.1f %% of one core" % (100.0 * (c1 - c0) / (w1 - w0)))
print("Hetzner requests in the window  %d%s" % (sum(req["counts"].values()), "".join(
    "\n  %-40s %d" % (r, c) for r, c in sorted(req["counts"].items()))))
nreq = sum(req["counts"].values())
print("Hetzner requests per Service    %.4f in the window (%.4f a minute)" % (
    nreq / l, nreq / l * 60.0 / (w1 - w0)))
print("daemon RSS                      %d KiB (anonymous %d KiB, file-backed %d KiB)" % (rss, anon, filed))
PY
