#!/bin/sh
# Builds prismlb and runs the demo of both roles against the fakes:
#  - the reconciler: two replicas (conf/demo-reconciler.conf) with
#    mod_leader; a LoadBalancer Service applied with kubectl gets a Hetzner
#    balancer that hcloud lists and describes, with the Service's external
#    IP; kubectl cordon takes a target away; the leader is stopped and the
#    other replica takes over and keeps reconciling;
#  - the proxy (conf/demo.conf) in front of three fake API servers:
#    discovery, requests through 127.0.0.1:7445, failover when a server
#    stops, the probes and metrics.
# Then it keeps running until Ctrl-C (or for DEMO_SECONDS seconds when set)
# and stops everything it started, by PID.
# Usage: sh tests/demo.sh
# DEMO_BUILD=DIR uses an existing build directory instead of building one
# (the meson test "demo" does, inside a private network namespace).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

if [ -n "${DEMO_BUILD:-}" ]; then
  build=$DEMO_BUILD
else
  "$top/tests/setup.sh" demo
  build="$top/build-demo"
  [ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
  ninja -C "$build" core/prismlb modules/mod_metrics/mod_metrics.so \
    modules/mod_tcp_proxy/mod_tcp_proxy.so modules/mod_endpoint_watch/mod_endpoint_watch.so \
    modules/mod_leader/mod_leader.so modules/mod_hetzner_lb/mod_hetzner_lb.so \
    tests/fakes/kube/prismlb-fake-kube tests/fakes/hetzner/prismlb-fake-hcloud >/dev/null
fi
demo="$build/demo"
export PRISMLB_MODULE_PATH="$build/modules"
kubectl_bin="$top/.tools/bin/kubectl"

rm -rf "$demo"
mkdir -p "$demo/tls" "$demo/kubecache" "$demo/home"
fake_pid= hz_pid= daemon_pid= ra_pid= rb_pid=
cleanup() {
  for p in $daemon_pid $ra_pid $rb_pid $hz_pid $fake_pid; do
    kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }
run() { printf '  $ %s\n' "$*"; "$@" 2>&1 | sed 's/^/    /'; }
wait_for() { # $1 = what, rest = command; bounded to 10 s
  what=$1; shift
  i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -le 100 ] || { echo "demo: $what did not happen" >&2; exit 1; }
    sleep 0.1
  done
}

# ------------------------------------------------------------------
say "three fake API servers sharing one store (tests/fakes/kube)"
"$build/tests/fakes/kube/prismlb-fake-kube" --servers 3 --port 16443 --admin-port 16440 \
  --tls-dir "$demo/tls" --state-file "$demo/state" >"$demo/fake.log" 2>&1 &
fake_pid=$!
wait_for "the fake API servers" grep -q '^ready' "$demo/state"
sed -n 's/^server /  server /p' "$demo/state"
cat >"$demo/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster:
    server: https://127.0.0.1:16443
    certificate-authority: $demo/tls/ca.crt
users:
- name: admin
  user:
    client-certificate: $demo/tls/client.crt
    client-key: $demo/tls/client.key
contexts:
- name: demo
  context: {cluster: demo, user: admin}
current-context: demo
KC
kubectl() { "$kubectl_bin" --kubeconfig "$demo/kubeconfig" --cache-dir "$demo/kubecache" "$@"; }
hcloud() {
  HOME="$demo/home" HCLOUD_CONFIG="$demo/home/cli.toml" \
    HCLOUD_ENDPOINT=http://127.0.0.1:16480/v1 HCLOUD_TOKEN=demo-token \
    command hcloud --poll-interval 100ms "$@"
}
# The demo's copies of the config files, with the paths of this run.
sed "s|\.\./build-demo/demo/|$demo/|" conf/demo.conf >"$demo/proxy.conf"
sed "s|\.\./build-demo/demo/|$demo/|" conf/demo-reconciler.conf >"$demo/replica-a.conf"
sed 's/port = 7447;/port = 7448;/' "$demo/replica-a.conf" >"$demo/replica-b.conf"

# ------------------------------------------------------------------
say "the reconciler role: a fake Hetzner Cloud API (tests/fakes/hetzner)"
cat >"$demo/seed.json" <<'SEED'
{"tokens": ["demo-token"],
 "networks": [{"id": 7, "name": "k8s", "ip_range": "10.0.0.0/16",
   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/24"},
               {"type": "vswitch", "ip_range": "10.0.1.0/24", "vswitch_id": 4242}]}]}
SEED
"$build/tests/fakes/hetzner/prismlb-fake-hcloud" --listen 127.0.0.1:16480 \
  --port-file "$demo/hz.url" --seed "$demo/seed.json" >"$demo/hz.log" 2>&1 &
hz_pid=$!
wait_for "the fake Hetzner API" test -s "$demo/hz.url"
echo "  $(cat "$demo/hz.url"), network k8s with the vSwitch subnet 10.0.1.0/24"

say "two reconciler replicas (conf/demo-reconciler.conf), one Lease"
echo demo-token >"$demo/hcloud-token"
"$build/core/prismlb" --config "$demo/replica-a.conf" --check-config
PRISMLB_LEADER_IDENTITY=replica-a \
  "$build/core/prismlb" --config "$demo/replica-a.conf" 2>"$demo/replica-a.log" &
ra_pid=$!
PRISMLB_LEADER_IDENTITY=replica-b \
  "$build/core/prismlb" --config "$demo/replica-b.conf" 2>"$demo/replica-b.log" &
rb_pid=$!
holder() { kubectl get lease -n kube-system prismlb-reconciler -o 'jsonpath={.spec.holderIdentity}'; }
has_holder() { [ -n "$(holder)" ]; }
wait_for "a leader" has_holder
echo "  replica-a is PID $ra_pid (probes on 7447), replica-b PID $rb_pid (7448)"
run kubectl get lease -n kube-system prismlb-reconciler \
  -o custom-columns=NAME:.metadata.name,HOLDER:.spec.holderIdentity,RENEWED:.spec.renewTime

say "kubectl: three nodes in the vSwitch subnet, a namespace, a LoadBalancer Service"
cat >"$demo/cluster.yaml" <<'YAML'
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {kubernetes.io/hostname: node-1}}
---
apiVersion: v1
kind: Node
metadata: {name: node-2, labels: {kubernetes.io/hostname: node-2}}
---
apiVersion: v1
kind: Node
metadata: {name: node-3, labels: {kubernetes.io/hostname: node-3}}
YAML
cat >"$demo/web.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  annotations:
    robotlb/lb-check-interval: "5"
spec:
  type: LoadBalancer
  selector: {app: web}
  ports:
  - {name: http, port: 80, protocol: TCP}
YAML
run kubectl apply -f "$demo/cluster.yaml"
for n in 1 2 3; do # what the kubelet reports
  kubectl patch node "node-$n" --subresource=status --type=merge -p "{\"status\": {
    \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\"}],
    \"addresses\": [{\"type\": \"InternalIP\", \"address\": \"10.0.1.1$n\"}]}}" >/dev/null
done
run kubectl create namespace shop
run kubectl apply -f "$demo/web.yaml"
external_ip() { kubectl get service -n shop "$1" -o 'jsonpath={.status.loadBalancer.ingress[0].ip}'; }
has_ip() { [ -n "$(external_ip "$1")" ]; }
wait_for "the Service's external IP" has_ip web
run hcloud load-balancer list
svc_columns=NAME:.metadata.name,TYPE:.spec.type,EXTERNAL-IP:.status.loadBalancer.ingress[0].ip,PORT:.spec.ports[0].port,NODE-PORT:.spec.ports[0].nodePort
run kubectl get service -n shop web -o custom-columns=$svc_columns
ip=$(external_ip web)
lb_ip=$(hcloud load-balancer describe web.shop -o 'format={{.PublicNet.IPv4.IP}}')
echo "  the Service's external IP $ip is the balancer's ($lb_ip)"
[ "$ip" = "$lb_ip" ] || { echo "demo: the external IP is not the balancer's" >&2; exit 1; }
target_ips() { hcloud load-balancer describe web.shop -o 'format={{range .Targets}}{{.IP.IP}} {{end}}'; }
targets() { set -- $(target_ips); echo $#; }
echo "  \$ hcloud load-balancer describe web.shop   (its services and targets)"
hcloud load-balancer describe web.shop | sed -n '/^Services:/,$p' | sed 's/^/    /'

say "kubectl cordon node-2: its target goes"
run kubectl cordon node-2
two_targets() { [ "$(targets)" = 2 ]; }
wait_for "node-2's target to go" two_targets
echo "  targets of web.shop now: $(target_ips)"

say "stop the leader: the other replica takes over and keeps reconciling"
leader=$(holder)
case $leader in
  replica-a) lpid=$ra_pid; other=replica-b ;;
  replica-b) lpid=$rb_pid; other=replica-a ;;
  *) echo "demo: unknown holder \"$leader\"" >&2; exit 1 ;;
esac
echo "  $leader (PID $lpid) holds the Lease; SIGTERM releases it"
kill -TERM "$lpid"
wait "$lpid" 2>/dev/null || true
[ "$lpid" = "$ra_pid" ] && ra_pid= || rb_pid=
is_other() { [ "$(holder)" = "$other" ]; }
wait_for "$other to take the Lease" is_other
run kubectl get lease -n kube-system prismlb-reconciler \
  -o custom-columns=NAME:.metadata.name,HOLDER:.spec.holderIdentity,RENEWED:.spec.renewTime
sed 's/name: web$/name: shop-api/; s/port: 80,/port: 8080,/' "$demo/web.yaml" >"$demo/api.yaml"
run kubectl apply -f "$demo/api.yaml"
wait_for "$other to give shop-api a balancer" has_ip shop-api
run hcloud load-balancer list
run kubectl get services -n shop -o custom-columns=$svc_columns
other_port=7447; [ "$other" = replica-b ] && other_port=7448
say "prismlb status of $other (its probe server's /status)"
run "$build/core/prismlb" status --url "http://127.0.0.1:$other_port"

# ------------------------------------------------------------------
say "the proxy role: the kubernetes EndpointSlices name all three API servers"
api() { # method path [body] — to server 0 directly
  curl -fsS --cacert "$demo/tls/ca.crt" --cert "$demo/tls/client.crt" \
    --key "$demo/tls/client.key" -X "$1" -H 'Content-Type: application/json' \
    ${3:+--data "$3"} "https://127.0.0.1:16443$2"
}
i=0
for url in $(sed -n 's/^server [0-9]* //p' "$demo/state"); do
  port=${url##*:}
  api POST /apis/discovery.k8s.io/v1/namespaces/default/endpointslices "{
    \"metadata\": {\"name\": \"kubernetes-$i\",
                   \"labels\": {\"kubernetes.io/service-name\": \"kubernetes\"}},
    \"addressType\": \"IPv4\",
    \"endpoints\": [{\"addresses\": [\"127.0.0.1\"], \"conditions\": {\"ready\": true}}],
    \"ports\": [{\"name\": \"https\", \"port\": $port, \"protocol\": \"TCP\"}]}" >/dev/null
  i=$((i + 1))
done
echo "  published $i EndpointSlices for service kubernetes"

say "prismlb --check-config (conf/demo.conf)"
"$build/core/prismlb" --config "$demo/proxy.conf" --check-config
"$build/core/prismlb" --config "$demo/proxy.conf" 2>"$demo/prismlb.log" &
daemon_pid=$!
wait_for "prismlb's probes" curl -fsS http://127.0.0.1:7446/healthz
upstreams() { curl -fsS http://127.0.0.1:7446/metrics | sed -n 's/^prismlb_upstreams_active{.*} //p'; }
three() { [ "$(upstreams)" = 3 ]; }
wait_for "discovery of all three servers" three
echo "  upstreams known and healthy: $(upstreams)"

via_proxy() {
  curl -fsS --cacert "$demo/tls/ca.crt" --cert "$demo/tls/client.crt" \
    --key "$demo/tls/client.key" "https://127.0.0.1:7445$1"
}
say "GET /version through the proxy on 127.0.0.1:7445"
via_proxy /version; echo

say "stop API server 1 (its port refuses connections)"
curl -fsS -X POST http://127.0.0.1:16440/servers/1/stop >/dev/null
n=0
for k in 1 2 3 4 5 6 7 8 9 10 11 12; do via_proxy /api >/dev/null 2>&1 && n=$((n + 1)); done
echo "  $n of 12 requests through the proxy right after the stop succeeded (a dial"
echo "  the stopped server refuses moves to another server before any byte reached curl)"
[ "$n" = 12 ] || { echo "demo: a request failed right after the server stopped" >&2; exit 1; }
two() { [ "$(upstreams)" = 2 ]; }
wait_for "the health checks to exclude it" two
echo "  upstreams healthy now: $(upstreams)"
n=0
for k in 1 2 3 4 5 6; do via_proxy /api >/dev/null 2>&1 && n=$((n + 1)); done
echo "  $n of 6 requests through the proxy succeeded"

say "prismlb status of the proxy"
run "$build/core/prismlb" status
say "GET /readyz?verbose"
curl -sS 'http://127.0.0.1:7446/readyz?verbose'
say "prismlb_ metrics"
curl -sS http://127.0.0.1:7446/metrics | grep '^prismlb_' | grep -v '^prismlb_build_info'

if [ -n "${DEMO_SECONDS:-}" ]; then
  sleep "$DEMO_SECONDS"
  for p in $daemon_pid $ra_pid $rb_pid; do
    kill -0 "$p" 2>/dev/null || { echo "demo: PID $p exited early" >&2; exit 1; }
  done
else
  echo
  echo "Running: the proxy (PID $daemon_pid) on 127.0.0.1:7445, probes on 127.0.0.1:7446;"
  echo "the reconciler replica $other (PID ${ra_pid:-$rb_pid}), probes on 127.0.0.1:$( \
    [ -n "$ra_pid" ] && echo 7447 || echo 7448)."
  echo "Logs: $demo/*.log. Try: kubectl --kubeconfig $demo/kubeconfig get services -A"
  echo "Ctrl-C stops everything."
  wait "$daemon_pid"
fi
