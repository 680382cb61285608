#!/bin/sh
# The arm64 build's in-process suites, cross-built with
# packaging/cross/aarch64-linux-gnu.ini and run by meson test under
# qemu-user (the cross file's exe_wrapper, qemu-aarch64-static, with this
# machine's :arm64 libraries): every Check suite under tests/unit (the
# core's and the modules' pure code), the module suites that drive a
# module's .so through a fake host (tests/e2e/MODULE/test_module.c:
# endpoint_watch, metrics) and the fuzz targets' replays of their seeds and
# regression inputs. Left out: the two tests/unit/config suites that run
# the daemon as a child process (check-config, config-files) and every
# daemon-level suite, since the kernel cannot exec an arm64 program here
# without a binfmt_misc handler; the images test and tests/packaging/deb.sh
# run the arm64 daemon under qemu-user instead. Outside tests/run.sh, whose
# time budget it would overrun.
# Usage: sh tests/packaging/arm64-units.sh [BUILD_DIR]   (default: build-arm64/)
# Prints meson's summary; exits non-zero when a suite fails.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$top/build-arm64}
if [ "$(dpkg --print-architecture)" != amd64 ]; then
  echo "arm64-units.sh: the build machine must be amd64 (arm64 is cross-built)" >&2
  exit 1
fi
sh "$top/tests/setup.sh" test
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$top" --cross-file "$top/packaging/cross/aarch64-linux-gnu.ini" \
    -Dpkg_config_path="$top/.tools/arm64/libevent-dev/usr/lib/aarch64-linux-gnu/pkgconfig" >/dev/null
fi
ninja -C "$dir" >/dev/null
# The tests whose program is one of those above, run in-process.
names=$(meson introspect "$dir" --tests | python3 -c '
import json, re, sys
own = re.compile(r"/tests/(unit/.*|e2e/[a-z_]+/test_[a-z_]+_module|fuzz/replay_[a-z]+)$")
for t in json.load(sys.stdin):
    spawns_daemon = any(d.endswith("@@prismlb@exe") for d in t.get("depends") or [])
    if own.search(t["cmd"][0]) and not spawns_daemon:
        print(t["name"])')
[ -n "$names" ] || { echo "arm64-units.sh: no unit suite found in $dir" >&2; exit 1; }
echo "arm64-units.sh: $(echo "$names" | wc -l) suites under qemu-aarch64-static"
# shellcheck disable=SC2086 # one test name a word
meson test -C "$dir" --print-errorlogs --num-processes 2 $names
