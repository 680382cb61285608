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

cat >"$work/seed.json" <<SEED
{"tokens": ["tok"], "max_load_balancers": $((n + 10)),
 "networks": [{"id": 7, "name": "k8s", "ip_range": "10.0.0.0/16",
   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/22"},
               {"type": "vswitch", "ip_range": "10.0.8.0/22", "vswitch_id": 1}]}]}
SEED
start_fakes
kadmin=$(sed -n 's/^admin //p' "$work/kube.state")
cat >"$work/prismlb.conf" <<CONF
instances = ( { module = "hetzner_lb"; name = "hz"; hcloud_endpoint = "$hz";
  kubeconfig = "$work/kubeconfig"; resync_interval = "300s";
  dynamic_node_selector = true; default_network = "k8s"; } );
CONF
ROBOTLB_HCLOUD_TOKEN=tok PRISMLB_MODULE_PATH="$build/modules" \
  "$build/core/prismlb" --config "$work/prismlb.conf" --log-level info >"$work/d.log" 2>&1 &
d_pid=$!
python3 - "$work" "$kube" "$base" "$kadmin" "$n" <<'PY'
import http.client, json, ssl, sys, time, urllib.parse
work, kube, base, kadmin, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
ctx = ssl.create_default_context(cafile=work + "/tls/ca.crt")
ctx.load_cert_chain(work + "/tls/client.crt", work + "/tls/client.key")
ctx.check_hostname = False
u = urllib.parse.urlparse(kube)
kc = http.client.HTTPSConnection(u.hostname, u.port, context=ctx)
def plain(url):
    p = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(p.hostname, p.port)
hc, ka = plain(base), plain(kadmin)
def k(method, path, body=None, ctype="application/json"):
    kc.request(method, path, body=json.dumps(body) if body is not None else None,
               headers={"Content-Type": ctype})
    r = kc.getresponse(); d = r.read()
    if r.status >= 300: raise SystemExit("%s %s: %d %s" % (method, path, r.status, d[:200]))
    return json.loads(d)
def admin(c, method, path):
    c.request(method, path); r = c.getresponse(); d = r.read(); return json.loads(d or b"{}")
for i in range(3):
    ip = "10.0.8.%d" % (10 + i)
    k("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n%d" % i}})
    k("PATCH", "/api/v1/nodes/n%d/status" % i, {"status": {"conditions": [{"type": "Ready", "status": "True"}],
      "addresses": [{"type": "InternalIP", "address": ip}]}}, "application/merge-patch+json")
time.sleep(2)
admin(ka, "DELETE", "/requests")
# the burst, through the bulk endpoint: all of them at once
ka.request("POST", "/bulk", body=json.dumps({"op": "create", "resource": "services",
  "count": n, "namePrefix": "b", "namespace": "default",
  "template": {"apiVersion": "v1", "kind": "Service",
               "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}}),
  headers={"Content-Type": "application/json"})
r = ka.getresponse(); d = r.read()
if r.status >= 300: raise SystemExit("bulk: %d %s" % (r.status, d[:300]))
t0 = time.time()
t_lbs = None
while time.time() - t0 < 600:
    st = admin(hc, "GET", "/_admin/state")
    if t_lbs is None and sum(1 for lb in st["load_balancers"] if len(lb.get("targets", [])) == 3) == n:
        t_lbs = time.time()
    svcs = k("GET", "/api/v1/namespaces/default/services")["items"]
    if sum(1 for s in svcs if s.get("status", {}).get("loadBalancer", {}).get("ingress")) == n:
        break
    time.sleep(0.2)
t_status = time.time()
time.sleep(3)
log = admin(ka, "GET", "/requests")["items"]
writes = [e for e in log if e["method"] in ("PUT", "PATCH") and e["path"].split("?")[0].endswith("/status")
          and "/services/" in e["path"]]
bad = [e for e in writes if e["status"] >= 300]
print("services                        %d (3 nodes, Cluster)" % n)
print("balancers with 3 targets after  %.1f s" % ((t_lbs or t_status) - t0))
print("statuses complete after         %.1f s (%.1f s after the last balancer)" % (t_status - t0,
      t_status - (t_lbs or t_status)))
print("status writes                   %d (%.2f per Service), failed %d" % (len(writes), len(writes) / n, len(bad)))
PY
