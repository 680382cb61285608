#!/bin/sh
# Discovery latency benchmark (not part of meson test): time from an
# EndpointSlice write at the fake API server to the proxy's routing table
# (mod_tcp_proxy's "upstream ... added" / "removed" log lines, timestamped by
# the daemon in ms), median of RUNS (default 25) changes, each adding one
# address and removing the previous one.
# Usage: tests/bench/endpoint_watch/run.sh [BUILD_DIR] [RUNS]
# BUILD_DIR defaults to ./build (use a plain, non-sanitizer build); the
# needed targets are built first.
set -eu
top=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:-$top/build}
runs=${2:-25}
[ -f "$build/build.ninja" ] || meson setup "$build" "$top" >/dev/null
ninja -C "$build" core/prismlb modules/mod_endpoint_watch/mod_endpoint_watch.so \
  modules/mod_tcp_proxy/mod_tcp_proxy.so tests/fakes/kube/prismlb-fake-kube >/dev/null
exec python3 "$top/tests/bench/endpoint_watch/bench.py" "$build" "$runs"
