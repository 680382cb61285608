#!/bin/sh
# The cross-built Debian packages of tests/packaging/deb.sh (see there),
# checked without installing them: their control data, then the daemon
# unpacked from them run under qemu-user.
# Usage: sh tests/packaging/deb-cross.sh OUT ARCH VERSION   (from deb.sh)
set -eu
out=$1 arch=$2 version=$3
deb=$out/prismlb_${version}_$arch.deb
dev=$out/prismlb-dev_${version}_$arch.deb
cpu=$(dpkg-architecture -a "$arch" -qDEB_HOST_GNU_CPU 2>/dev/null)
qemu=qemu-$cpu-static
command -v "$qemu" >/dev/null 2>&1 || { echo "deb-cross.sh: $qemu is missing (sh tests/setup.sh deb)" >&2; exit 1; }

status=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; status=1; }
expect() { # $1 = what, rest = a command that must succeed
  what=$1; shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

for p in "$deb" "$dev"; do
  info=$(dpkg-deb --info "$p")
  echo "$info" | sed -n 's/^ \(Package\|Architecture\|Depends\|Multi-Arch\): /  \1: /p'
  if echo "$info" | grep -qx " Architecture: $arch"; then
    ok "$(basename "$p"): Architecture: $arch"
  else
    fail "$(basename "$p"): not Architecture: $arch"
  fi
done
expect "prismlb's Depends name its libraries" sh -c "dpkg-deb --info '$deb' | grep -q '^ Depends: .*libevent-core'"
if grep -q '^E: ' "$out/lintian.txt"; then fail "lintian reports errors"; else ok "lintian: no error"; fi

root=$(mktemp -d "$out/root-XXXXXX")
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
dpkg-deb -x "$dev" "$root"
bin=$root/usr/sbin/prismlb
machine=$(readelf -h "$bin" | sed -n 's/^ *Machine: *//p')
if echo "$machine" | grep -qi "$cpu"; then
  ok "usr/sbin/prismlb is an $arch program ($machine)"
else
  fail "usr/sbin/prismlb is not an $arch program: $machine"
fi

# prismlb from the unpacked root, under qemu-user, in that root's folder.
check() { # $1 = what, $2 = the output it must print (empty: any), rest = arguments
  what=$1 want=$2; shift 2
  if got=$(cd "$root" && "$qemu" -L "$root" usr/sbin/prismlb "$@" 2>&1) \
    && { [ -z "$want" ] || [ "$got" = "$want" ]; }; then
    ok "$what${want:+ ($got)}"
  else
    fail "$what: $got"
  fi
}
check "prismlb --check-config -c etc/prismlb/proxy.conf" OK --check-config -c etc/prismlb/proxy.conf
check "prismlb --check-config -c etc/prismlb/reconciler.conf" OK --check-config -c etc/prismlb/reconciler.conf
check "prismlb --version" "" --version
(cd "$root" && "$qemu" -L "$root" usr/sbin/prismlb --version)

conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles 2>/dev/null || true)
expect "the conffiles" sh -c "echo '$conffiles' | grep -qx /etc/prismlb/proxy.conf"
expect "prismlb@.service" test -f "$root/lib/systemd/system/prismlb@.service"
expect "man page prismlb(8)" test -f "$root/usr/share/man/man8/prismlb.8.gz"
if [ -f "$root/usr/include/prismlb/module.h" ] && ls "$root"/usr/lib/*/pkgconfig/prismlb-module.pc >/dev/null 2>&1; then
  ok "module.h and prismlb-module.pc"
else
  fail "module.h or prismlb-module.pc missing"
fi
# dh_compress gzips the guide (over 4 KiB, in /usr/share/doc).
expect "module_util.h and the module guide" test -f "$root/usr/include/prismlb/module_util.h" -a \
  -f "$root/usr/share/doc/prismlb/module-guide.md.gz"
exit $status
