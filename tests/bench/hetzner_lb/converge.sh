#!/bin/sh
# Convergence cost of mod_hetzner_lb: N Services of type LoadBalancer
# (default 1000) on M nodes (default 50) created at once in
# prismlb-fake-kube, balancers in prismlb-fake-hcloud (default bucket 3600,
# refill 1/s, as Hetzner's). Reports the time from the first Service to
# every balancer labelled with all its targets, the Hetzner requests that
# took (by route) and 429s, the requests of a quiet minute's worth of syncs
# afterwards (resync_interval 300 s, so none are due), the requests one
# Service change costs, and the daemon's RSS (anonymous and file-backed
# apart). With R (resync_interval in seconds, default 300) below 300 the
# balancers are listed during the run and the RSS is read one resync after
# the change (R + 10 s), so it includes what the resync lists cost.
# Usage: tests/bench/hetzner_lb/converge.sh BUILD_DIR [N] [M] [R]
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [N] [M] [R]}" && pwd)
n=${2:-1000}
m=${3:-50}
resync=${4:-300}
work=$(mktemp -d)
. "$(dirname "$0")/fakes.sh"

cat >"$work/seed.json" <<SEED
{"tokens": ["tok"], "max_load_balancers": $((n + 10)),
 "networks": [{"id": 7, "name": "k8s", "ip_range": "10.0.0.0/16",
   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/22"},
               {"type": "vswitch", "ip_range": "10.0.8.0/22", "vswitch_id": 1}]}]}
SEED
start_fakes
cat >"$work/prismlb.conf" <<CONF
instances = ( { module = "hetzner_lb"; name = "hz"; hcloud_endpoint = "$hz";
  kubeconfig = "$work/kubeconfig"; resync_interval = "${resync}s";
  dynamic_node_selector = true; default_network = "k8s";
  default_balancer_type = "lb21"; } );
CONF
ROBOTLB_HCLOUD_TOKEN=tok PRISMLB_MODULE_PATH="$build/modules" \
  "$build/core/prismlb" --config "$work/prismlb.conf" --log-level info >"$work/d.log" 2>&1 &
d_pid=$!
sleep 1
python3 - "$work" "$kube" "$base" "$n" "$m" "$d_pid" "$resync" <<'PY'
import http.client, json, ssl, sys, time, urllib.parse
work, kube, base, n, m, pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
resync = int(sys.argv[7])
ctx = ssl.create_default_context(cafile=work + "/tls/ca.crt")
ctx.load_cert_chain(work + "/tls/client.crt", work + "/tls/client.key")
ctx.check_hostname = False
u = urllib.parse.urlparse(kube)
kc = http.client.HTTPSConnection(u.hostname, u.port, context=ctx)
hu = urllib.parse.urlparse(base)
hc = http.client.HTTPConnection(hu.hostname, hu.port)

def k(method, path, body=None, ctype="application/json"):
    kc.request(method, path, body=json.dumps(body) if body is not None else None,
               headers={"Content-Type": ctype})
    r = kc.getresponse(); d = r.read()
    if r.status >= 300: raise SystemExit("%s %s: %d %s" % (method, path, r.status, d[:200]))
    return json.loads(d)

def admin(method, path):
    hc.request(method, path); r = hc.getresponse(); return json.loads(r.read() or b"{}")

def rss():
    """VmRSS, RssAnon (the heap, stacks) and RssFile (the binary's and shared
    libraries' pages), KiB."""
    f = dict(l.split(":", 1) for l in open("/proc/%s/status" % pid) if ":" in l)
    return tuple(int(f[k].split()[0]) for k in ("VmRSS", "RssAnon", "RssFile"))

for i in range(m):
    ip = "10.0.8.%d" % (10 + i)
    k("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n%02d" % i},
      "status": {"conditions": [{"type": "Ready", "status": "True"}],
                 "addresses": [{"type": "InternalIP", "address": ip}]}})
    k("PATCH", "/api/v1/nodes/n%02d/status" % i, {"status": {"conditions": [{"type": "Ready", "status": "True"}],
      "addresses": [{"type": "InternalIP", "address": ip}]}}, "application/merge-patch+json")
time.sleep(1)
admin("POST", "/_admin/reset")
t0 = time.time()
for i in range(n):
    k("POST", "/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service",
      "metadata": {"name": "s%04d" % i, "namespace": "default"},
      "spec": {"type": "LoadBalancer", "selector": {"app": "s%04d" % i},
               "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30000 + i % 2000}]}})
t_created = time.time() - t0

def converged():
    st = admin("GET", "/_admin/state")
    return sum(1 for lb in st["load_balancers"]
               if "robotlb/service-uid" in (lb.get("labels") or {}) and len(lb.get("targets", [])) == m
               and len(lb.get("services", [])) == 1)

done = 0
while time.time() - t0 < 3600:
    done = converged()
    if done == n: break
    time.sleep(2)
t_conv = time.time() - t0
req = admin("GET", "/_admin/requests")
r429 = sum(1 for r in req["requests"] if r["status"] == 429)
total = sum(req["counts"].values())
def statuses_ok():
    svcs = k("GET", "/api/v1/namespaces/default/services")["items"]
    return sum(1 for s in svcs if s.get("status", {}).get("loadBalancer", {}).get("ingress"))
while statuses_ok() < n and time.time() - t0 < 3700: time.sleep(1)
t_status = time.time() - t0
print("services / nodes                %d / %d (lb21, Cluster policy)" % (n, m))
print("services created in             %.1f s" % t_created)
print("balancers converged             %d in %.1f s (statuses %.1f s)" % (done, t_conv, t_status))
print("requests to converge            %d, 429 answers %d" % (total, r429))
for route, c in sorted(req["counts"].items(), key=lambda x: -x[1]): print("  %-40s %d" % (route, c))
# quiet: node heartbeats sync every Service; nothing differs, nothing is sent
admin("POST", "/_admin/reset")
for j in range(6):
    k("PATCH", "/api/v1/nodes/n00/status", {"status": {"conditions": [{"type": "Ready", "status": "True",
      "lastHeartbeatTime": "2026-01-01T00:00:%02dZ" % j}]}}, "application/merge-patch+json")
    time.sleep(5)
print("requests in 30 s of node heartbeats (no resync due)   %d" % sum(admin("GET", "/_admin/requests")["counts"].values()))
# one Service change: a second port
admin("POST", "/_admin/reset")
k("PATCH", "/api/v1/namespaces/default/services/s0007", {"spec": {"ports": [
  {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30007},
  {"name": "https", "port": 443, "protocol": "TCP", "nodePort": 31007}]}},
  "application/merge-patch+json")
time.sleep(10)
req = admin("GET", "/_admin/requests")
print("requests for one Service change (a port added)        %d: %s" % (sum(req["counts"].values()), ", ".join(
    "%s %d" % (r, c) for r, c in req["counts"].items())))
if resync < 300:
    time.sleep(resync + 10)
print("daemon RSS                      %d KiB (anonymous %d KiB, file-backed %d KiB)" % rss())
PY
