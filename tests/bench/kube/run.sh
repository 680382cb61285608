#!/bin/sh
# Informer benchmark (not part of meson test): watch events per second into
# an informer with ~1 KiB objects, initial list rate, heap per cached
# object. Usage: tests/bench/kube/run.sh [BUILD_DIR] [N]
# BUILD_DIR defaults to ./build (use a plain, non-sanitizer build).
set -eu
top=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:-$top/build}
n=${2:-20000}
[ -f "$build/build.ninja" ] || meson setup "$build" "$top" >/dev/null
ninja -C "$build" tests/e2e/kube/bench_kube tests/fakes/kube/prismlb-fake-kube >/dev/null
PRISMLB_BUILD_ROOT=$build PRISMLB_SOURCE_ROOT=$top exec "$build/tests/e2e/kube/bench_kube" "$n"
