# Sourced by bench.sh and converge.sh, with $build and $work set: stops
# what they started (by PID) on exit, and start_fakes runs
# prismlb-fake-hcloud seeded with $work/seed.json and prismlb-fake-kube,
# sets hz (the Hetzner API URL), base (its root) and kube (the API server
# URL), and writes $work/kubeconfig for the daemon; $hz_args, if set, are
# more arguments of the Hetzner fake.
hz_pid= kube_pid= d_pid=
cleanup() {
  for p in $d_pid $hz_pid $kube_pid; do kill -TERM "$p" 2>/dev/null || true; done
  for p in $d_pid $hz_pid $kube_pid; do
    i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

start_fakes() {
  "$build/tests/fakes/hetzner/prismlb-fake-hcloud" --listen 127.0.0.1:0 \
    --port-file "$work/hz.url" --seed "$work/seed.json" ${hz_args:-} >"$work/hz.log" 2>&1 &
  hz_pid=$!
  mkdir "$work/tls"
  "$build/tests/fakes/kube/prismlb-fake-kube" --tls-dir "$work/tls" \
    --state-file "$work/kube.state" >"$work/kube.log" 2>&1 &
  kube_pid=$!
  i=0
  while { [ ! -s "$work/hz.url" ] || ! grep -q '^ready' "$work/kube.state" 2>/dev/null; } \
      && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
  hz=$(cat "$work/hz.url")
  base=${hz%/v1}
  kube=$(sed -n 's/^server 0 //p' "$work/kube.state")
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
