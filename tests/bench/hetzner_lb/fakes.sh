# Sourced by the hetzner_lb benches, with $build and $work set: stops what
# they started (by PID) on exit, and
#   write_seed MAX NETWORK VSWITCH  writes $work/seed.json for the Hetzner
#       fake: token "tok", room for MAX balancers, network "k8s" (id 7,
#       ip_range NETWORK) with the cloud subnet 10.0.0.0/22 and the vSwitch
#       subnet VSWITCH;
#   start_fakes  runs prismlb-fake-hcloud seeded with $work/seed.json and
#       prismlb-fake-kube, sets hz (the Hetzner API URL), base (its root),
#       kube (the API server URL) and kadmin (its admin URL), and writes
#       $work/kubeconfig for the daemon; $hz_args, if set, are more
#       arguments of the Hetzner fake;
#   start_kube DIR  runs another prismlb-fake-kube with its state in DIR
#       and sets kube2 and kadmin2 to its URL and admin URL (for a run
#       without the daemon);
#   start_daemon LEVEL SETTINGS  writes $work/prismlb.conf, one hetzner_lb
#       instance "hz" against the fakes with SETTINGS added, and runs the
#       daemon of $build with log level LEVEL (under the command $wrap,
#       if set: wrap="valgrind --tool=massif" for a heap profile); sets
#       d_pid.
# $pin_kube and $pin_side, if set, prefix the commands of the API servers
# and of the Hetzner fake and the daemon (taskset -c N: one CPU each side).
# The benches' Python imports fakes.py from this folder (PYTHONPATH).
hz_pid= kube_pid= d_pid= more_pids=
PYTHONPATH=$(cd "$(dirname "$0")" && pwd)${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
cleanup() {
  for p in $d_pid $hz_pid $kube_pid $more_pids; do kill -TERM "$p" 2>/dev/null || true; done
  for p in $d_pid $hz_pid $kube_pid $more_pids; do
    i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

write_seed() {
  cat >"$work/seed.json" <<SEED
{"tokens": ["tok"], "max_load_balancers": $1,
 "networks": [{"id": 7, "name": "k8s", "ip_range": "$2",
   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/22"},
               {"type": "vswitch", "ip_range": "$3", "vswitch_id": 1}]}]}
SEED
}

# fake_kube DIR: a prismlb-fake-kube with TLS material and state in DIR;
# sets fk_pid once its state file says ready.
fake_kube() {
  mkdir -p "$1/tls"
  ${pin_kube:-} "$build/tests/fakes/kube/prismlb-fake-kube" --tls-dir "$1/tls" \
    --state-file "$1/kube.state" >"$1/kube.log" 2>&1 &
  fk_pid=$!
  i=0
  while ! grep -q '^ready' "$1/kube.state" 2>/dev/null && [ $i -lt 300 ]; do
    sleep 0.1; i=$((i+1))
  done
}

start_kube() {
  fake_kube "$1"
  more_pids="$more_pids $fk_pid"
  kube2=$(sed -n 's/^server 0 //p' "$1/kube.state")
  kadmin2=$(sed -n 's/^admin //p' "$1/kube.state")
}

start_fakes() {
  ${pin_side:-} "$build/tests/fakes/hetzner/prismlb-fake-hcloud" --listen 127.0.0.1:0 \
    --port-file "$work/hz.url" --seed "$work/seed.json" ${hz_args:-} >"$work/hz.log" 2>&1 &
  hz_pid=$!
  fake_kube "$work"
  kube_pid=$fk_pid
  i=0
  while [ ! -s "$work/hz.url" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
  hz=$(cat "$work/hz.url")
  base=${hz%/v1}
  kube=$(sed -n 's/^server 0 //p' "$work/kube.state")
  kadmin=$(sed -n 's/^admin //p' "$work/kube.state")
  cat >"$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: $work/tls/ca.crt
    server: $kube
  name: fake
contexts:
- context:
    cluster: fake
    user: me
  name: fake
current-context: fake
users:
- name: me
  user:
    client-certificate: $work/tls/client.crt
    client-key: $work/tls/client.key
KC
}

start_daemon() {
  cat >"$work/prismlb.conf" <<CONF
instances = ( { module = "hetzner_lb"; name = "hz"; hcloud_endpoint = "$hz";
  kubeconfig = "$work/kubeconfig"; $2 } );
CONF
  ROBOTLB_HCLOUD_TOKEN=tok PRISMLB_MODULE_PATH="$build/modules" \
    ${pin_side:-} ${wrap:-} "$build/core/prismlb" --config "$work/prismlb.conf" --log-level "$1" >"$work/d.log" 2>&1 &
  d_pid=$!
}
