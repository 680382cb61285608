#!/bin/sh
# Benchmark of mod_tcp_proxy against HAProxy 2.6 (mode tcp), nginx 1.22
# (stream) and a direct connection, side by side, interleaved.
# Usage: tests/bench/proxy/run.sh [BUILD_DIR]   (default: build/)
# Needs: tests/setup.sh bench; a built tree (core/prismlb, mod_tcp_proxy,
# tests/modules). Environment knobs: see bench.py.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
PRISMLB_BUILD_ROOT=${1:-${PRISMLB_BUILD_ROOT:-$top/build}}
export PRISMLB_BUILD_ROOT
exec python3 "$here/bench.py"
