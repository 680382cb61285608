#!/bin/sh
# Convergence cost of mod_hetzner_lb: N Services of type LoadBalancer
# (default 1000) on M nodes (default 50) created at once in
# prismlb-fake-kube, balancers in prismlb-fake-hcloud (default bucket 3600,
# refill 1/s, as Hetzner's). Reports the time the creates took beside the
# time the same creates take in a second fake API server that no daemon
# watches, interleaved with them 50 at a time (the ratio is what prismlb
# costs the API server), the time from
# the first Service to every balancer labelled with all its targets, the
# Hetzner requests that took (by route) and 429s, the requests of a quiet
# minute's worth of syncs afterwards (resync_interval 300 s, so none are
# due), the requests one Service change costs, and the daemon's RSS
# (anonymous and file-backed apart). With R (resync_interval in seconds,
# default 300) below 300 the balancers are listed during the run and the
# RSS is read one resync after the change (R + 10 s), so it includes what
# the resync lists cost.
# The ratio is the API server's cost of prismlb (its watch, its status
# writes), so with two CPUs or more the API servers and the client creating
# the Services run on CPU 0 and the daemon and the Hetzner fake on CPU 1,
# as the daemon would run on another machine than the API server; SPLIT=0
# runs everything on every CPU (then the ratio also holds the daemon's and
# the Hetzner fake's CPU taken from the API server's).
# Usage: [SPLIT=0] tests/bench/hetzner_lb/converge.sh BUILD_DIR [N] [M] [R]
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [N] [M] [R]}" && pwd)
n=${2:-1000}
m=${3:-50}
resync=${4:-300}
work=$(mktemp -d)
. "$(dirname "$0")/fakes.sh"
if [ "${SPLIT:-1}" != 0 ] && [ "$(nproc)" -ge 2 ]; then
  pin_kube="taskset -c 0" pin_side="taskset -c 1"
  echo "CPUs                            0: the API servers and the client, 1: the daemon and the Hetzner fake"
else
  pin_kube= pin_side=
  echo "CPUs                            all shared"
fi

write_seed $((n + 10)) 10.0.0.0/16 10.0.8.0/22
start_fakes
# the same creates in a fake API server of their own with no daemon
# watching: the time they take without prismlb
start_kube "$work/bare"
start_daemon info "resync_interval = \"${resync}s\"; dynamic_node_selector = true;
  default_network = \"k8s\"; default_balancer_type = \"lb21\";"
sleep 1
$pin_kube python3 - "$work" "$kube" "$base" "$n" "$m" "$d_pid" "$resync" "$kube2" <<'PY'
import sys, time
from fakes import Hetzner, Kube, memory
work, kube, base, n, m, pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
resync = int(sys.argv[7])
kc, hz = Kube(work + "/tls", kube), Hetzner(base)
bare = Kube(work + "/bare/tls", sys.argv[8])

def create(kube, i, ns="default", port0=30000):
    kube.k("POST", "/api/v1/namespaces/%s/services" % ns, {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "s%04d" % i, "namespace": ns},
           "spec": {"type": "LoadBalancer", "selector": {"app": "s%04d" % i},
                    "ports": [{"port": 80, "protocol": "TCP", "nodePort": port0 + i % 1300}]}})

for i in range(m):
    kc.ready_node("n%02d" % i, "10.0.8.%d" % (10 + i))
    bare.ready_node("n%02d" % i, "10.0.8.%d" % (10 + i))
time.sleep(1)
# The n creates in both API servers, interleaved 50 at a time (in the
# order with, without, without, with, ...): what slows the machine for a
# moment slows both sides alike. Each side's time is the sum of its
# batches; the first batch of the daemon's side starts the clock of the
# convergence.
hz.admin("POST", "/_admin/reset")
t_created = t_bare = 0.0
t0 = None
for b in range(0, n, 50):
    order = (kc, bare) if (b // 50) % 2 == 0 else (bare, kc)
    for side in order:
        t = time.time()
        if side is kc and t0 is None:
            t0 = t
        for i in range(b, min(b + 50, n)):
            create(side, i)
        if side is kc:
            t_created += time.time() - t
        else:
            t_bare += time.time() - t

def converged():
    st = hz.admin("GET", "/_admin/state")
    return sum(1 for lb in st["load_balancers"]
               if "robotlb/service-uid" in (lb.get("labels") or {}) and len(lb.get("targets", [])) == m
               and len(lb.get("services", [])) == 1)

done = 0
while time.time() - t0 < 3600:
    done = converged()
    if done == n: break
    time.sleep(2)
t_conv = time.time() - t0
req = hz.admin("GET", "/_admin/requests")
r429 = sum(1 for r in req["requests"] if r["status"] == 429)
total = sum(req["counts"].values())
while kc.services_with_ingress() < n and time.time() - t0 < 3700: time.sleep(1)
t_status = time.time() - t0
print("services / nodes                %d / %d (lb21, Cluster policy)" % (n, m))
print("services created in             %.2f s, without the daemon %.2f s (interleaved): %.2fx" % (
    t_created, t_bare, t_created / t_bare))
print("balancers converged             %d in %.1f s (statuses %.1f s)" % (done, t_conv, t_status))
print("requests to converge            %d, 429 answers %d" % (total, r429))
for route, c in sorted(req["counts"].items(), key=lambda x: -x[1]): print("  %-40s %d" % (route, c))
# quiet: node heartbeats sync every Service; nothing differs, nothing is sent
hz.admin("POST", "/_admin/reset")
for j in range(6):
    kc.k("PATCH", "/api/v1/nodes/n00/status", {"status": {"conditions": [{"type": "Ready", "status": "True",
      "lastHeartbeatTime": "2026-01-01T00:00:%02dZ" % j}]}}, "application/merge-patch+json")
    time.sleep(5)
print("requests in 30 s of node heartbeats (no resync due)   %d" % sum(hz.admin("GET", "/_admin/requests")["counts"].values()))
# one Service change: a second port
hz.admin("POST", "/_admin/reset")
kc.k("PATCH", "/api/v1/namespaces/default/services/s0007", {"spec": {"ports": [
  {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30007},
  {"name": "https", "port": 443, "protocol": "TCP", "nodePort": 31007}]}},
  "application/merge-patch+json")
time.sleep(10)
req = hz.admin("GET", "/_admin/requests")
print("requests for one Service change (a port added)        %d: %s" % (sum(req["counts"].values()), ", ".join(
    "%s %d" % (r, c) for r, c in req["counts"].items())))
if resync < 300:
    time.sleep(resync + 10)
print("daemon RSS                      %d KiB (anonymous %d KiB, file-backed %d KiB)" % memory(pid))
PY
