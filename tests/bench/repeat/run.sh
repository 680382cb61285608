#!/bin/sh
# Runs the README's test command (sh tests/run.sh) RUNS times in a row, each
# in a fresh clone of HEAD, with BURNERS CPU-burning processes running beside
# every run: the check that the suite's outcome does not depend on the
# machine's speed. Stops at the first run that fails (its log is kept).
# Prints, for each run, when it started, how long it took and its closing
# "N passed, N failed" line; exits 0 when every run passed.
#
# Usage: tests/bench/repeat/run.sh RUNS [BURNERS]
#   WORKDIR  where the clones go (default: build-repeat/ in this checkout);
#            each run's clone is WORKDIR/run-K, its output WORKDIR/run-K.log
#
# The burners are busy shell loops at the default priority, started before
# the first run and stopped by their PIDs when the last one ends (or this
# script is interrupted). Not part of meson test: a run takes ~25 minutes
# on two cores, more with burners.
set -u
top=$(cd "$(dirname "$0")/../../.." && pwd)
runs=${1:-}
burners=${2:-0}
case "$runs$burners" in
  '' | *[!0-9]*) echo "usage: $0 RUNS [BURNERS]" >&2; exit 2 ;;
esac
[ "$runs" -ge 1 ] || { echo "usage: $0 RUNS [BURNERS]" >&2; exit 2; }
work=${WORKDIR:-$top/build-repeat}
mkdir -p "$work" || exit 1
rev=$(git -C "$top" rev-parse HEAD) || exit 1

pids=""
stop_burners() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  pids=""
}
trap 'stop_burners' EXIT
trap 'stop_burners; exit 130' INT TERM

i=0
while [ "$i" -lt "$burners" ]; do
  sh -c 'while :; do :; done' &
  pids="$pids $!"
  i=$((i + 1))
done
echo "repeat: $runs run(s) of $rev, $burners burner(s)${pids:+ (pids$pids)}, $(nproc) CPUs"

k=1
while [ "$k" -le "$runs" ]; do
  dir="$work/run-$k"
  log="$work/run-$k.log"
  rm -rf "$dir"
  git clone -q "$top" "$dir" && git -C "$dir" checkout -q "$rev" || exit 1
  t0=$(date +%s)
  echo "repeat: run $k started $(date -u +%H:%M:%S)"
  (cd "$dir" && sh tests/run.sh) >"$log" 2>&1
  rc=$?
  took=$(($(date +%s) - t0))
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
  echo "repeat: run $k exit $rc in $((took / 60)) min $((took % 60)) s: ${last:-no closing line}"
  if [ "$rc" -ne 0 ]; then
    grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT)' "$log" | head -n 20
    echo "repeat: run $k failed; its output: $log"
    exit 1
  fi
  rm -rf "$dir"
  k=$((k + 1))
done
echo "repeat: $runs of $runs run(s) passed"
