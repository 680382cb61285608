#!/bin/sh
# Soak of one role of prismlb: see soak.py (what runs, what is sampled, when
# a run fails). A command of tests/bench, never run by meson test.
# Usage: tests/bench/soak/run.sh proxy|reconciler [MINUTES] [BUILD_DIR]
#   MINUTES: default 30; BUILD_DIR: default build/ (a built tree: core/prismlb,
#   the modules and, for the reconciler, tests/fakes).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
mode=${1:?usage: $0 proxy|reconciler [MINUTES] [BUILD_DIR]}
minutes=${2:-30}
PRISMLB_BUILD_ROOT=$(cd "${3:-$top/build}" && pwd)
export PRISMLB_BUILD_ROOT
exec python3 "$here/soak.py" "$mode" "$minutes"
