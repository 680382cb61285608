#!/bin/sh
# Builds the two prismlb images for amd64 and arm64 with buildah, FROM
# scratch, from a release build (stripped) of each architecture (arm64 with
# the cross file packaging/cross/aarch64-linux-gnu.ini), and writes each
# image as one OCI archive holding an image index (manifest list) that names
# both architectures:
#   OUT/prismlb-proxy.oci.tar       prismlb + mod_tcp_proxy, mod_endpoint_watch, mod_metrics
#   OUT/prismlb-reconciler.oci.tar  prismlb + mod_leader, mod_hetzner_lb, mod_metrics, CA bundle
# Each architecture's image holds that architecture's dynamic loader and
# exactly the shared objects its loader resolves for the binary and the
# image's modules (asked with `LOADER --list`, the arm64 one run under
# qemu-aarch64-static), /etc/passwd and /etc/group entries for 65534, the
# role's default config at /etc/prismlb/prismlb.conf, USER 65534, an
# ENTRYPOINT running it and an SPDX 2.3 SBOM of its files at
# /usr/share/doc/prismlb/sbom.spdx.json (packaging/container/sbom.py); no
# shell, no package manager. OUT/ARCH/ keeps each architecture's single
# image archive, root filesystem and SBOM; OUT/SIZES lists each image's
# files by size.
#
# Usage: packaging/container/build.sh [OUT]      (default: build-images/)
# Push both architectures under one tag:
#        skopeo copy --all oci-archive:OUT/prismlb-proxy.oci.tar docker://REGISTRY/prismlb-proxy:TAG
# The build host is amd64 Debian 12 after sh tests/setup.sh test (which
# installs the arm64 cross toolchain, the :arm64 libraries and qemu-user).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-images}
mkdir -p "$out"
out=$(cd "$out" && pwd)

for t in buildah meson ninja readelf python3; do
  command -v "$t" >/dev/null 2>&1 || { echo "build.sh: $t is missing (sh tests/setup.sh test)" >&2; exit 1; }
done
host=$(dpkg --print-architecture)
if [ "$host" != amd64 ]; then
  echo "build.sh: the build host must be amd64 (this one is $host): arm64 is cross-built" >&2
  exit 1
fi
arches="amd64 arm64"
cross_file=$top/packaging/cross/aarch64-linux-gnu.ini
evpc=$top/.tools/arm64/libevent-dev/usr/lib/aarch64-linux-gnu/pkgconfig
for t in aarch64-linux-gnu-gcc qemu-aarch64-static; do
  command -v "$t" >/dev/null 2>&1 || { echo "build.sh: $t is missing (sh tests/setup.sh test)" >&2; exit 1; }
done
[ -d "$evpc" ] || { echo "build.sh: $evpc is missing (sh tests/setup.sh test)" >&2; exit 1; }

version=$(sed -n "s/^ *version : '\(.*\)',/\1/p" "$top/meson.build" | head -n1)
revision=$(git -C "$top" rev-parse HEAD 2>/dev/null || echo unknown)
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# buildah keeps its images here, apart from any other storage.
store=$out/storage
bh() { buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs "$@"; }

# The release build of $arch, installed into $stage.
release() {
  rel=$out/$arch/release
  stage=$out/$arch/stage
  if [ ! -f "$rel/build.ninja" ]; then
    set -- --buildtype=release -Dtests=false -Dstrip=true \
      --prefix=/usr --libdir=lib --sbindir=sbin --sysconfdir=/etc
    if [ "$arch" != "$host" ]; then
      set -- "$@" --cross-file "$cross_file" -Dpkg_config_path="$evpc"
    fi
    meson setup "$rel" "$top" "$@" >/dev/null
  fi
  ninja -C "$rel" >/dev/null
  rm -rf "$stage"
  DESTDIR=$stage meson install -C "$rel" --no-rebuild --quiet
}

# Runs a program of $arch on this host.
run_arch() {
  if [ "$arch" = "$host" ]; then
    "$@"
  else
    qemu-aarch64-static "$@"
  fi
}

# One root filesystem per role.
rootfs() { # $1 = dir, $2 = config, rest = modules
  dir=$1 conf=$2; shift 2
  rm -rf "$dir"
  mkdir -p "$dir/usr/sbin" "$dir/usr/lib/prismlb/modules" "$dir/etc/prismlb"
  cp "$stage/usr/sbin/prismlb" "$dir/usr/sbin/prismlb"
  objs="$dir/usr/sbin/prismlb"
  for m in "$@"; do
    cp "$stage/usr/lib/prismlb/modules/mod_$m.so" "$dir/usr/lib/prismlb/modules/"
    objs="$objs $dir/usr/lib/prismlb/modules/mod_$m.so"
  done
  # The loader, and every shared object it resolves, at the path it
  # resolves it to (the loader's default search path finds them there).
  interp=$(readelf -l "$dir/usr/sbin/prismlb" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  [ -n "$interp" ] || { echo "build.sh: no program interpreter in $arch prismlb" >&2; exit 1; }
  list=$out/$arch/ldlist
  echo "$interp" > "$list"
  for o in $objs; do
    run_arch "$interp" --list "$o" >> "$list" \
      || { echo "build.sh: $interp --list $o failed" >&2; exit 1; }
  done
  if grep -q 'not found' "$list"; then
    echo "build.sh: $arch: a shared object is missing:" >&2
    grep 'not found' "$list" >&2
    exit 1
  fi
  libs=$(sed -n 's/.*=> \(\/[^ ]*\) (.*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p; s/^\(\/[^ ]*\)$/\1/p' "$list" | sort -u)
  : > "$dir.host"
  for l in $libs; do
    mkdir -p "$dir$(dirname "$l")"
    cp -L "$l" "$dir$l"
    echo "$l" >> "$dir.host"
  done
  printf 'root:x:0:0:root:/:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n' > "$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$dir/etc/group"
  printf 'hosts: files dns\n' > "$dir/etc/nsswitch.conf"
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$dir/etc/hosts"
  cp "$conf" "$dir/etc/prismlb/prismlb.conf"
}

image() { # $1 = name, $2 = rootfs, $3 = description
  name=$1 dir=$2 desc=$3
  # The SBOM: every file above, the Debian package of each host file.
  mkdir -p "$dir/usr/share/doc/prismlb"
  python3 "$top/packaging/container/sbom.py" "$dir" "$name" "$version" "$arch" "$revision" "$created" \
    "$dir.host" > "$out/$arch/$name.spdx.json"
  cp "$out/$arch/$name.spdx.json" "$dir/usr/share/doc/prismlb/sbom.spdx.json"
  chmod -R go-w "$dir"
  ref=localhost/$name:$version-$arch
  variant=
  [ "$arch" != arm64 ] || variant=v8
  ctr=$(bh from --quiet scratch)
  bh copy --quiet "$ctr" "$dir/" / >/dev/null
  bh config \
    --user 65534:65534 \
    --entrypoint '["/usr/sbin/prismlb", "--config", "/etc/prismlb/prismlb.conf"]' \
    --cmd '' --workingdir / --port 7446/tcp \
    --os linux --arch "$arch" ${variant:+--variant "$variant"} \
    --label "org.opencontainers.image.title=$name" \
    --label "org.opencontainers.image.description=$desc" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.created=$created" \
    --label "org.opencontainers.image.licenses=BSD-2-Clause" \
    --label "org.opencontainers.image.source=https://github.com/prismlb/prismlb" \
    --label "org.opencontainers.image.vendor=prismlb" \
    "$ctr"
  bh commit --quiet --format oci --rm "$ctr" "$ref" >/dev/null
  rm -f "$out/$arch/$name.oci.tar"
  bh push --quiet "$ref" "oci-archive:$out/$arch/$name.oci.tar:$name:$version"
  size=$(du -sb "$dir" | cut -f1)
  {
    echo "$name $version $arch: $size bytes uncompressed, $(stat -c %s "$out/$arch/$name.oci.tar") bytes as an OCI archive"
    (cd "$dir" && find . -type f -printf '%s %p\n' | sort -rn)
    echo
  } >> "$out/SIZES"
  echo "$name $arch: $out/$arch/$name.oci.tar ($size bytes uncompressed)"
}

# The manifest list of both architectures, as one OCI archive.
index() { # $1 = name
  name=$1
  list=localhost/$name:$version
  bh manifest rm "$list" >/dev/null 2>&1 || true
  bh manifest create "$list" >/dev/null
  for arch in $arches; do
    bh manifest add "$list" "containers-storage:localhost/$name:$version-$arch" >/dev/null
  done
  rm -f "$out/$name.oci.tar"
  bh manifest push --quiet --all "$list" "oci-archive:$out/$name.oci.tar:$name:$version"
  echo "$name: $out/$name.oci.tar ($arches)"
}

: > "$out/SIZES"
for arch in $arches; do
  mkdir -p "$out/$arch"
  release
  rootfs "$out/$arch/rootfs-proxy" "$top/conf/proxy.conf" tcp_proxy endpoint_watch metrics
  image prismlb-proxy "$out/$arch/rootfs-proxy" \
    "prismlb, proxy role: per-node TCP load balancer for the Kubernetes API servers"

  rootfs "$out/$arch/rootfs-reconciler" "$top/conf/reconciler.conf" leader hetzner_lb metrics
  mkdir -p "$out/$arch/rootfs-reconciler/etc/ssl/certs"
  cp -L /etc/ssl/certs/ca-certificates.crt "$out/$arch/rootfs-reconciler/etc/ssl/certs/ca-certificates.crt"
  echo /etc/ssl/certs/ca-certificates.crt >> "$out/$arch/rootfs-reconciler.host"
  image prismlb-reconciler "$out/$arch/rootfs-reconciler" \
    "prismlb, reconciler role: Services of type LoadBalancer as Hetzner Cloud load balancers"
done
index prismlb-proxy
index prismlb-reconciler
