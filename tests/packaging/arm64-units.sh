#!/bin/sh
# The arm64 build's in-process suites, cross-built with
# packaging/cross/aarch64-linux-gnu.ini and run by meson test under
# qemu-user (the cross file's exe_wrapper, qemu-aarch64-static, with this
# machine's :arm64 libraries): every Check suite under tests/unit (the
# core's and the modules' pure code), the module suites that drive a
# module's .so through a fake host (tests/e2e/MODULE/test_module.c:
# endpoint_watch, metrics) and the fuzz targets' replays of their seeds and
# regression inputs. Two unit suites (check-config, config-files) run the
# daemon as a child process: the kernel execs that arm64 program through a
# binfmt_misc handler for qemu that tests/packaging/binfmt-arm64.sh sets up
# in a user namespace of this run only; where the kernel gives a user
# namespace no binfmt_misc of its own (before 6.7) they are left out, and
# said so. The daemon-level suites stay native (the images test and
# tests/packaging/deb.sh run the arm64 daemon). Outside tests/run.sh, whose
# time budget the cross build would overrun.
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
binfmt=$top/tests/packaging/binfmt-arm64.sh
if sh "$binfmt" --check 2>/dev/null; then
  spawn=1
else
  spawn=0
  echo "arm64-units.sh: no binfmt_misc in a user namespace here: check-config and config-files left out"
fi
# The tests whose program is one of those above, run in-process.
names=$(meson introspect "$dir" --tests | SPAWN=$spawn python3 -c '
import json, os, re, sys
own = re.compile(r"/tests/(unit/.*|e2e/[a-z_]+/test_[a-z_]+_module|fuzz/replay_[a-z]+)$")
for t in json.load(sys.stdin):
    spawns_daemon = any(d.endswith("@@prismlb@exe") for d in t.get("depends") or [])
    if own.search(t["cmd"][0]) and (os.environ["SPAWN"] == "1" or not spawns_daemon):
        print(t["name"])')
[ -n "$names" ] || { echo "arm64-units.sh: no suite found in $dir" >&2; exit 1; }
echo "arm64-units.sh: $(echo "$names" | wc -l) suites under qemu-aarch64-static"
if [ "$spawn" = 1 ]; then
  set -- sh "$binfmt"
else
  set --
fi
# shellcheck disable=SC2086 # one test name a word
"$@" meson test -C "$dir" --print-errorlogs --num-processes 2 $names
