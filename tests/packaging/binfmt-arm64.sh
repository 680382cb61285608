#!/bin/sh
# Runs a command with a binfmt_misc handler that hands arm64 programs to
# qemu-aarch64-static, in a user and mount namespace of its own: the
# kernel (6.7 or later) gives each user namespace its own binfmt_misc, so
# the handler is seen by the command and its children only, and nothing
# changes for the rest of the machine. The F flag opens qemu now, so a
# chroot need not hold it.
# Usage: sh tests/packaging/binfmt-arm64.sh COMMAND [ARG...]
#        sh tests/packaging/binfmt-arm64.sh --check   (exit 0 when possible here)
set -eu
qemu=/usr/bin/qemu-aarch64-static
if [ "${PRISMLB_BINFMT_INNER:-}" != 1 ]; then
  [ -x "$qemu" ] || { echo "binfmt-arm64.sh: $qemu is missing (sh tests/setup.sh test)" >&2; exit 1; }
  PRISMLB_BINFMT_INNER=1 exec unshare --user --map-root-user --mount sh "$0" "$@"
fi
unset PRISMLB_BINFMT_INNER
mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
# ELF64, little endian, version 1, an executable or shared object (type
# 2 or 3), machine 183 (AArch64).
printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$qemu"':F' \
  > /proc/sys/fs/binfmt_misc/register
if [ "${1:-}" = --check ]; then
  exit 0
fi
exec "$@"
