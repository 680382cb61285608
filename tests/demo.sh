#!/bin/sh
# Builds prismlb and runs the demo: the daemon with conf/demo.conf, showing
# what it serves, until Ctrl-C (or for DEMO_SECONDS seconds when set).
# Usage: sh tests/demo.sh
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/tests/setup.sh" demo

build="$top/build-demo"
[ -f "$build/build.ninja" ] || meson setup "$build" -Dtests=false >/dev/null
ninja -C "$build" >/dev/null

module_path=$(find "$build/modules" -name 'mod_*.so' -exec dirname {} \; | sort -u | tr '\n' ':')
export PRISMLB_MODULE_PATH="${module_path%:}"

"$build/core/prismlb" --config conf/demo.conf --check-config
"$build/core/prismlb" --config conf/demo.conf &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT INT TERM

# Wait (bounded) for the probe port to answer.
i=0
until curl -fsS -o /dev/null http://127.0.0.1:7446/healthz 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
    echo "demo: the daemon did not come up" >&2
    exit 1
  fi
  sleep 0.1
done

echo
echo "== GET /healthz";  curl -sS http://127.0.0.1:7446/healthz; echo
echo "== GET /readyz?verbose"; curl -sS 'http://127.0.0.1:7446/readyz?verbose'; echo
echo "== GET /metrics (prismlb_ lines)"; curl -sS http://127.0.0.1:7446/metrics | grep '^prismlb_' || true
echo
if [ -n "${DEMO_SECONDS:-}" ]; then
  sleep "$DEMO_SECONDS"
else
  echo "prismlb (PID $pid) is running with conf/demo.conf; Ctrl-C stops it."
  wait $pid
fi
