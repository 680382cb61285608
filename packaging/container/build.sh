#!/bin/sh
# Builds the two prismlb images with buildah, FROM scratch, from a release
# build (stripped), and writes each as an OCI archive:
#   OUT/prismlb-proxy.oci.tar       prismlb + mod_tcp_proxy, mod_endpoint_watch, mod_metrics
#   OUT/prismlb-reconciler.oci.tar  prismlb + mod_leader, mod_hetzner_lb, mod_metrics, CA bundle
# Each image holds the dynamic loader and exactly the shared objects that
# ldd finds for the binary and the image's modules, /etc/passwd and
# /etc/group entries for 65534, the role's default config at
# /etc/prismlb/prismlb.conf, USER 65534 and an ENTRYPOINT running it; no
# shell, no package manager. OUT/SIZES lists each image's files by size.
#
# Usage: packaging/container/build.sh [OUT]      (default: build-images/)
# Push:  skopeo copy oci-archive:OUT/prismlb-proxy.oci.tar docker://REGISTRY/prismlb-proxy:TAG
# arm64: the images take the architecture of the machine that builds them
# (the binary, the modules and the shared objects are that machine's), so
# on an arm64 Debian 12 host, after sh tests/setup.sh test:
#        sh packaging/container/build.sh
# and push both architectures under one tag with a manifest list:
#        buildah manifest create prismlb-proxy:0.1.0
#        buildah manifest add prismlb-proxy:0.1.0 oci-archive:amd64/prismlb-proxy.oci.tar
#        buildah manifest add prismlb-proxy:0.1.0 oci-archive:arm64/prismlb-proxy.oci.tar
#        buildah manifest push --all prismlb-proxy:0.1.0 docker://REGISTRY/prismlb-proxy:0.1.0
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-images}
mkdir -p "$out"
out=$(cd "$out" && pwd)
arch=$(dpkg --print-architecture)
rel=$out/release
stage=$out/stage

for t in buildah meson ninja ldd readelf; do
  command -v "$t" >/dev/null 2>&1 || { echo "build.sh: $t is missing (sh tests/setup.sh images)" >&2; exit 1; }
done

# 1. The release build, installed into a staging tree.
if [ ! -f "$rel/build.ninja" ]; then
  meson setup "$rel" "$top" --buildtype=release -Dtests=false -Dstrip=true \
    --prefix=/usr --libdir=lib --sbindir=sbin --sysconfdir=/etc >/dev/null
fi
ninja -C "$rel" >/dev/null
rm -rf "$stage"
DESTDIR=$stage meson install -C "$rel" --no-rebuild --quiet
version=$(sed -n "s/^ *version : '\(.*\)',/\1/p" "$top/meson.build" | head -n1)
revision=$(git -C "$top" rev-parse HEAD 2>/dev/null || echo unknown)
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# buildah keeps its images here, apart from any other storage.
store=$out/storage
bh() { buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs "$@"; }

# 2. One root filesystem per role.
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
  # The loader, and every shared object ldd resolves, at the path it
  # resolves it to (the loader's default search path finds them there).
  interp=$(readelf -l "$dir/usr/sbin/prismlb" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  # shellcheck disable=SC2086
  libs=$( (echo "$interp"; for o in $objs; do ldd "$o"; done) \
    | sed -n 's/.*=> \(\/[^ ]*\) (.*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p; s/^\(\/[^ ]*\)$/\1/p' | sort -u)
  for l in $libs; do
    mkdir -p "$dir$(dirname "$l")"
    cp -L "$l" "$dir$l"
  done
  printf 'root:x:0:0:root:/:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n' > "$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$dir/etc/group"
  printf 'hosts: files dns\n' > "$dir/etc/nsswitch.conf"
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$dir/etc/hosts"
  cp "$conf" "$dir/etc/prismlb/prismlb.conf"
  chmod -R go-w "$dir"
}

image() { # $1 = name, $2 = rootfs, $3 = description
  name=$1 dir=$2 desc=$3
  ctr=$(bh from --quiet scratch)
  bh copy --quiet "$ctr" "$dir/" / >/dev/null
  bh config \
    --user 65534:65534 \
    --entrypoint '["/usr/sbin/prismlb", "--config", "/etc/prismlb/prismlb.conf"]' \
    --cmd '' --workingdir / --port 7446/tcp \
    --os linux --arch "$arch" \
    --label "org.opencontainers.image.title=$name" \
    --label "org.opencontainers.image.description=$desc" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.created=$created" \
    --label "org.opencontainers.image.licenses=BSD-2-Clause" \
    --label "org.opencontainers.image.source=https://github.com/prismlb/prismlb" \
    --label "org.opencontainers.image.vendor=prismlb" \
    "$ctr"
  bh commit --quiet --format oci --rm "$ctr" "localhost/$name:$version" >/dev/null
  rm -f "$out/$name.oci.tar"
  bh push --quiet "localhost/$name:$version" "oci-archive:$out/$name.oci.tar:$name:$version"
  size=$(du -sb "$dir" | cut -f1)
  {
    echo "$name $version: $size bytes uncompressed, $(stat -c %s "$out/$name.oci.tar") bytes as an OCI archive"
    (cd "$dir" && find . -type f -printf '%s %p\n' | sort -rn)
    echo
  } >> "$out/SIZES"
  echo "$name: $out/$name.oci.tar ($size bytes uncompressed)"
}

: > "$out/SIZES"
rootfs "$out/rootfs-proxy" "$top/conf/proxy.conf" tcp_proxy endpoint_watch metrics
image prismlb-proxy "$out/rootfs-proxy" \
  "prismlb, proxy role: per-node TCP load balancer for the Kubernetes API servers"

rootfs "$out/rootfs-reconciler" "$top/conf/reconciler.conf" leader hetzner_lb metrics
mkdir -p "$out/rootfs-reconciler/etc/ssl/certs"
cp -L /etc/ssl/certs/ca-certificates.crt "$out/rootfs-reconciler/etc/ssl/certs/ca-certificates.crt"
image prismlb-reconciler "$out/rootfs-reconciler" \
  "prismlb, reconciler role: Services of type LoadBalancer as Hetzner Cloud load balancers"
