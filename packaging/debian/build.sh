#!/bin/sh
# Builds the Debian source package and the binary packages prismlb and
# prismlb-dev from this tree with dpkg-buildpackage, and runs lintian on
# them. packaging/debian/ becomes the package's debian/ directory (with
# packaging/systemd/prismlb@.service as debian/prismlb@.service).
# Usage: packaging/debian/build.sh [OUT [ARCH]]   (default: build-deb/, this machine's)
# The packages and lintian's report (OUT/lintian.txt) land in OUT.
# An ARCH other than the build machine's is cross-built
# (dpkg-buildpackage --host-arch ARCH) with the cross toolchain and the
# :ARCH development packages tests/setup.sh installs. Debian 12's
# libevent-dev cannot be installed beside the build machine's (it is not
# Multi-Arch: same), so setup.sh unpacks it into .tools/ARCH/libevent-dev:
# dpkg-buildpackage then runs with -d, after dpkg-checkbuilddeps -a ARCH
# found every other build dependency, and debian/rules hands meson that
# tree through PRISMLB_PKG_CONFIG_PATH.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-deb}
build_arch=$(dpkg --print-architecture)
arch=${2:-$build_arch}
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -S Version)
src=$out/prismlb-$version
rm -rf "$src" "$out"/prismlb_* "$out"/prismlb-dev_*
mkdir -p "$src"
# The tracked files (and new ones not ignored), as a source tarball has them.
(cd "$top" && git ls-files -co --exclude-standard -z | grep -zv '^packaging/debian/' \
  | xargs -0 cp --parents -t "$src")
cp -r "$top/packaging/debian" "$src/debian"
rm -f "$src/debian/build.sh"
cp "$top/packaging/systemd/prismlb@.service" "$src/debian/prismlb@.service"
set -- -us -uc
if [ "$arch" != "$build_arch" ]; then
  evpc=$top/.tools/$arch/libevent-dev/usr/lib/$(dpkg-architecture -a "$arch" -qDEB_HOST_MULTIARCH 2>/dev/null)/pkgconfig
  unmet=$(cd "$src" && dpkg-checkbuilddeps -a "$arch" 2>&1 | sed -n 's/.*Unmet build dependencies: //p' \
    | tr ' ' '\n' | grep -v '^libevent-dev\(:'"$arch"'\)\?$' | tr '\n' ' ') || true
  if [ -n "${unmet% }" ]; then
    echo "build.sh: unmet build dependencies for $arch: $unmet(sh tests/setup.sh deb)" >&2
    exit 1
  fi
  if ! dpkg-query -W -f='${Status}' "libevent-dev:$arch" 2>/dev/null | grep -q 'install ok installed'; then
    [ -d "$evpc" ] || { echo "build.sh: no libevent-dev:$arch: $evpc is missing (sh tests/setup.sh deb)" >&2; exit 1; }
    export PRISMLB_PKG_CONFIG_PATH="$evpc"
  fi
  set -- "$@" --host-arch "$arch" -d
  # debian/rules runs no test; saying so keeps dh from warning about tests
  # in a cross build.
  DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }nocheck"
  export DEB_BUILD_OPTIONS
fi
(cd "$src" && dpkg-buildpackage "$@") > "$out/dpkg-buildpackage.log" 2>&1 || {
  tail -n 60 "$out/dpkg-buildpackage.log"; exit 1; }
changes=$out/prismlb_${version}_$arch.changes
lintian --info --display-info --pedantic "$changes" "$out/prismlb_$version.dsc" > "$out/lintian.txt" 2>&1 || true
cat "$out/lintian.txt"
ls "$out"/*.deb "$out"/*.dsc
if grep -q '^E: ' "$out/lintian.txt"; then
  echo "build.sh: lintian reports errors" >&2
  exit 1
fi
