#!/bin/sh
# The Debian package, end to end: packaging/debian/build.sh builds it
# (dpkg-buildpackage) and fails on a lintian error; a fresh Debian 12 root
# made with debootstrap installs prismlb and prismlb-dev with apt (which
# pulls their dependencies from the Debian archive), and there
#   prismlb --check-config -c /etc/prismlb/proxy.conf
# passes (and for reconciler.conf), and the conffiles, the unit, the man
# page, module.h and prismlb-module.pc are in place. Needs root
# (debootstrap, chroot) and the Debian archive.
# With ARCH another architecture (arm64 on an amd64 machine), the packages
# are cross-built (dpkg-buildpackage --host-arch ARCH, lintian clean),
# dpkg-deb --info shows their architecture and dependencies, and both are
# unpacked with dpkg-deb -x into a root that qemu-user puts first (-L):
# every path the program opens is looked up there, then on this machine,
# whose :ARCH libraries tests/setup.sh installed. There prismlb
# --check-config passes for etc/prismlb/proxy.conf and reconciler.conf
# (its modules dlopen'ed from the package), and the conffiles, the unit,
# the man page, module.h, module_util.h, the module guide and
# prismlb-module.pc are in the packages.
# (Installing them into a debootstrap'd ARCH root would run ARCH programs
# from the root: the handler of tests/packaging/binfmt-arm64.sh lives in a
# user namespace, where debootstrap's second stage cannot make its device
# nodes, and registering one for the whole machine is not this test's to do.)
# Usage: sh tests/packaging/deb.sh [OUT [ARCH]]    (default: build-deb/, this machine's)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
sh "$top/tests/setup.sh" deb

arch=${2:-$(dpkg --print-architecture)}
sh "$top/packaging/debian/build.sh" "$out" "$arch"
version=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -S Version)

if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  exec sh "$top/tests/packaging/deb-cross.sh" "$out" "$arch" "$version"
fi

root=$(mktemp -d "$out/root-XXXXXX")
cleanup() {
  for m in "$root/proc" "$root/dev/pts"; do
    mountpoint -q "$m" && umount "$m"
  done
  rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$out/debootstrap-cache"
echo "deb.sh: debootstrap bookworm into $root"
debootstrap --variant=minbase --cache-dir="$out/debootstrap-cache" bookworm "$root" "$mirror" \
  > "$out/debootstrap.log" 2>&1 || { tail -n 30 "$out/debootstrap.log"; exit 1; }
mount -t proc proc "$root/proc"
cp "$out/prismlb_${version}_$arch.deb" "$out/prismlb-dev_${version}_$arch.deb" "$root/tmp/"
chroot "$root" apt-get update -q > "$out/apt.log" 2>&1
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends \
  "/tmp/prismlb_${version}_$arch.deb" "/tmp/prismlb-dev_${version}_$arch.deb" >> "$out/apt.log" 2>&1 \
  || { tail -n 30 "$out/apt.log"; exit 1; }
echo "deb.sh: installed; dpkg -l:"
chroot "$root" dpkg -l prismlb prismlb-dev | tail -n 2

status=0
check() { # $1 = what, rest = command in the root
  what=$1; shift
  if chroot "$root" "$@" > "$out/check.log" 2>&1; then
    echo "ok   $what"
  else
    echo "FAIL $what:"; cat "$out/check.log"; status=1
  fi
}
check "prismlb --check-config -c /etc/prismlb/proxy.conf" \
  sh -c 'test "$(prismlb --check-config -c /etc/prismlb/proxy.conf)" = OK'
check "prismlb --check-config -c /etc/prismlb/reconciler.conf" \
  sh -c 'test "$(prismlb --check-config -c /etc/prismlb/reconciler.conf)" = OK'
check "prismlb --version" prismlb --version
check "the conffiles" sh -c 'dpkg-query -W -f="\${Conffiles}\n" prismlb | grep -q /etc/prismlb/proxy.conf'
check "prismlb@.service" test -f /lib/systemd/system/prismlb@.service
check "man page prismlb(8)" test -f /usr/share/man/man8/prismlb.8.gz
check "module.h and prismlb-module.pc" sh -c 'test -f /usr/include/prismlb/module.h && ls /usr/lib/*/pkgconfig/prismlb-module.pc'
# dh_compress gzips the guide (over 4 KiB, in /usr/share/doc).
check "module_util.h and the module guide" sh -c 'test -f /usr/include/prismlb/module_util.h && test -f /usr/share/doc/prismlb/module-guide.md.gz'
exit $status
