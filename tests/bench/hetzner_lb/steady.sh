#!/bin/sh
# Steady state of mod_hetzner_lb in a large cluster: S Services (default
# 10000) of which L are LoadBalancer (default 200), N nodes (default 500)
# sending a status heartbeat every 10 s (N/10 updates a second), E
# EndpointSlices (default 2000, of ClusterIP Services) of which 20 change
# every second. Once every balancer converged, reports over W seconds
# (default 60) the daemon's CPU (share of one core, from /proc/PID/stat),
# the Hetzner requests the churn caused, and the daemon's RSS (anonymous and
# file-backed apart) with each informer's object count.
# Usage: tests/bench/hetzner_lb/steady.sh BUILD_DIR [S] [L] [N] [E] [W]
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [S] [L] [N] [E] [W]}" && pwd)
s=${2:-10000}
l=${3:-200}
n=${4:-500}
e=${5:-2000}
w=${6:-60}
work=$(mktemp -d)
. "$(dirname "$0")/fakes.sh"

cat >"$work/seed.json" <<SEED
{"tokens": ["tok"], "max_load_balancers": $((l + 10)),
 "networks": [{"id": 7, "name": "k8s", "ip_range": "10.0.0.0/8",
   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/22"},
               {"type": "vswitch", "ip_range": "10.8.0.0/16", "vswitch_id": 1}]}]}
SEED
start_fakes
kadmin=$(sed -n 's/^admin //p' "$work/kube.state")
cat >"$work/prismlb.conf" <<CONF
instances = ( { module = "hetzner_lb"; name = "hz"; hcloud_endpoint = "$hz";
  kubeconfig = "$work/kubeconfig"; resync_interval = "300s";
  dynamic_node_selector = true; default_network = "k8s";
  default_balancer_type = "lb31"; } );
CONF
ROBOTLB_HCLOUD_TOKEN=tok PRISMLB_MODULE_PATH="$build/modules" \
  "$build/core/prismlb" --config "$work/prismlb.conf" --log-level warn >"$work/d.log" 2>&1 &
d_pid=$!
python3 - "$work" "$kube" "$base" "$kadmin" "$s" "$l" "$n" "$e" "$w" "$d_pid" <<'PY'
import http.client, json, os, ssl, sys, time, urllib.parse
work, kube, base, kadmin = sys.argv[1:5]
s, l, n, e, w = (int(x) for x in sys.argv[5:10])
pid = sys.argv[10]
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
def admin(c, method, path, body=None):
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse(); d = r.read()
    if r.status >= 300: raise SystemExit("%s %s: %d %s" % (method, path, r.status, d[:300]))
    return json.loads(d or b"{}")
def bulk(**kw): return admin(ka, "POST", "/bulk", kw)
def status():
    f = dict(x.split(":", 1) for x in open("/proc/%s/status" % pid) if ":" in x)
    return tuple(int(f[key].split()[0]) for key in ("VmRSS", "RssAnon", "RssFile"))
def cpu_ticks():
    st = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(st[11]) + int(st[12])  # utime + stime

t0 = time.time()
for i in range(n):
    ip = "10.8.%d.%d" % (i // 250, 10 + i % 250)
    k("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n%06d" % i},
      "status": {"conditions": [{"type": "Ready", "status": "True"}],
                 "addresses": [{"type": "InternalIP", "address": ip}]}})
bulk(op="create", resource="services", count=s - l, namePrefix="c", namespace="default",
     template={"spec": {"type": "ClusterIP", "selector": {"app": "c"}, "ports": [{"port": 80}]}})
eps = [{"addresses": ["10.244.%d.%d" % (j, 10 + j)], "nodeName": "n%06d" % j,
        "conditions": {"ready": True}} for j in range(10)]
bulk(op="create", resource="endpointslices", count=e, namePrefix="c", namespace="default",
     template={"metadata": {"labels": {"kubernetes.io/service-name": "c000000"}},
               "addressType": "IPv4", "endpoints": eps, "ports": [{"port": 80, "protocol": "TCP"}]})
bulk(op="create", resource="services", count=l, namePrefix="lb", namespace="default",
     template={"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}})
t_made = time.time() - t0

def converged():
    st = admin(hc, "GET", "/_admin/state")
    return sum(1 for b in st["load_balancers"] if len(b.get("targets", [])) > 0
               and len(b.get("services", [])) == 1)
done = 0
while time.time() - t0 < 1800:
    done = converged()
    if done == l: break
    time.sleep(2)
t_conv = time.time() - t0

# steady state: heartbeats (n/10 node updates a second) and 20 slice changes a second
admin(hc, "POST", "/_admin/reset")
c0, w0, hb, sl = cpu_ticks(), time.time(), 0, 0
tick = 0
while time.time() - w0 < w:
    nb = max(1, n // 10)
    bulk(op="update", resource="nodes", count=nb, start=(tick * nb) % n, namePrefix="n")
    for _ in range(2):  # two bursts of 10 each second
        bulk(op="update", resource="endpointslices", count=10, start=(sl % e), namePrefix="c",
             namespace="default")
        sl += 10
        time.sleep(0.5)
    hb += nb
    tick += 1
c1, w1 = cpu_ticks(), time.time()
req = admin(hc, "GET", "/_admin/requests")
rss, anon, filed = status()
print("services / LoadBalancer / nodes / slices  %d / %d / %d / %d" % (s, l, n, e))
print("objects created in              %.1f s" % t_made)
print("balancers converged             %d in %.1f s" % (done, t_conv))
print("steady window                   %.0f s: %d node updates, %d slice updates" % (w1 - w0, hb, sl))
print("daemon CPU                      %.1f %% of one core" % (100.0 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (w1 - w0)))
print("Hetzner requests in the window  %d%s" % (sum(req["counts"].values()), "".join(
    "\n  %-40s %d" % (r, c) for r, c in sorted(req["counts"].items()))))
print("daemon RSS                      %d KiB (anonymous %d KiB, file-backed %d KiB)" % (rss, anon, filed))
PY
