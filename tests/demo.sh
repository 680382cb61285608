#!/bin/sh
# Builds prismlb and runs the demo: the proxy role (conf/demo.conf) in front
# of three fake Kubernetes API servers. It shows discovery, requests
# through the proxy, and failover when a server stops; then it keeps
# running until Ctrl-C (or for DEMO_SECONDS seconds when set).
# Usage: sh tests/demo.sh
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/tests/setup.sh" demo

build="$top/build-demo"
demo="$build/demo"
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" core/prismlb modules/mod_metrics/mod_metrics.so \
  modules/mod_tcp_proxy/mod_tcp_proxy.so modules/mod_endpoint_watch/mod_endpoint_watch.so \
  tests/fakes/kube/prismlb-fake-kube >/dev/null
export PRISMLB_MODULE_PATH="$build/modules"

rm -rf "$demo"
mkdir -p "$demo/tls"
fake_pid= daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  [ -n "$fake_pid" ] && kill -TERM "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }
wait_for() { # $1 = what, rest = command; bounded to 10 s
  what=$1; shift
  i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -le 100 ] || { echo "demo: $what did not happen" >&2; exit 1; }
    sleep 0.1
  done
}

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
"$build/core/prismlb" --config conf/demo.conf --check-config
"$build/core/prismlb" --config conf/demo.conf 2>"$demo/prismlb.log" &
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

say "GET /readyz?verbose"
curl -sS 'http://127.0.0.1:7446/readyz?verbose'
say "prismlb_ metrics"
curl -sS http://127.0.0.1:7446/metrics | grep '^prismlb_' | grep -v '^prismlb_build_info'

if [ -n "${DEMO_SECONDS:-}" ]; then
  sleep "$DEMO_SECONDS"
else
  echo
  echo "prismlb (PID $daemon_pid) proxies on 127.0.0.1:7445 and serves probes on 127.0.0.1:7446;"
  echo "its log is $demo/prismlb.log. Ctrl-C stops it and the fake API servers."
  wait "$daemon_pid"
fi
