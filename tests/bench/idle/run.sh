#!/bin/sh
# Idle benchmark (not part of meson test): prismlb with the metrics module
# only against nginx and HAProxy, interleaved; time from exec to listening
# and idle RSS, medians of RUNS (default 7) runs.
# Usage: tests/bench/idle/run.sh [BUILD_DIR] [RUNS]
# BUILD_DIR defaults to ./build (a plain, non-sanitizer build); it is built
# first.
set -eu
top=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:-$top/build}
runs=${2:-7}
[ -f "$build/build.ninja" ] || meson setup "$build" "$top" >/dev/null
ninja -C "$build" core/prismlb modules/mod_metrics/mod_metrics.so >/dev/null
exec python3 "$top/tests/bench/idle/idle.py" "$build" "$runs"
