#!/bin/sh
# Fuzz campaign over the libFuzzer targets of tests/fuzz: builds them with
# clang under ASan+UBSan in build-fuzz (-Dfuzzers=true), then runs each
# target for SECONDS (default 15), one at a time and niced, on a working
# copy of its seed corpus (corpus/NAME) plus its regression inputs
# (regress/NAME). Prints one line per target: executions, execs/s, coverage
# (libFuzzer's cov and ft), corpus growth, findings. A finding leaves its
# input in build-fuzz/fuzz-out/NAME/; it becomes a regression input
# (tests/fuzz/regress/NAME/) with its fix. Exit 1 if a target could not
# build or run, 1 also for a finding, or 3 for findings only when
# FUZZ_FINDINGS_FAIL=0 (tests/run.sh: a campaign's findings are reported,
# the regression replay in meson test is what gates).
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-15}
[ $# -gt 0 ] && shift
targets=${*:-"jparse kubeconfig selector config httpd lease endpoints hzapi hzmodel readyz"}
bdir="$top/build-fuzz"
out="$bdir/fuzz-out"

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang is not installed"; exit 1
fi
if [ ! -f "$bdir/build.ninja" ]; then
  CC=clang meson setup "$bdir" "$top" -Dfuzzers=true -Db_sanitize=address,undefined \
    -Db_lundef=false >"$bdir.setup.log" 2>&1 || { cat "$bdir.setup.log"; exit 1; }
fi
builds=""
for t in $targets; do builds="$builds tests/fuzz/fuzz_$t"; done
for m in metrics tcp_proxy endpoint_watch leader hetzner_lb; do
  builds="$builds modules/mod_$m/mod_$m.so"
done
# shellcheck disable=SC2086
nice ninja -C "$bdir" -j2 $builds >"$bdir.ninja.log" 2>&1 || { tail -n 40 "$bdir.ninja.log"; exit 1; }

status=0
finding_status=1
[ "${FUZZ_FINDINGS_FAIL:-1}" = 0 ] && finding_status=3
for t in $targets; do
  work="$out/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/crashes"
  cp "$top/tests/fuzz/corpus/$t/"* "$work/corpus/" 2>/dev/null
  seeds=$(ls "$work/corpus" | wc -l)
  extra=""
  [ -d "$top/tests/fuzz/regress/$t" ] && extra="$top/tests/fuzz/regress/$t"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    LSAN_OPTIONS="suppressions=$top/tests/fuzz/lsan.supp" \
    nice "$bdir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix="$work/crashes/" -max_len=65536 -rss_limit_mb=1024 \
    "$work/corpus" $extra >"$work/log" 2>&1
  rc=$?
  took=$(($(date +%s) - t0))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$work/log" | tail -n1)
  units=$(ls "$work/corpus" | wc -l)
  found=$(ls "$work/crashes" | wc -l)
  echo "fuzz $t: ${execs:-?} runs in ${took} s of ${secs} (${rate:-?}/s), ${cov:-no coverage line}," \
       "corpus $seeds -> $units, findings $found"
  if [ "$found" -ne 0 ]; then
    [ "$status" -eq 1 ] || status=$finding_status
    grep -m1 -A12 'ERROR\|fuzz:' "$work/log"
    echo "fuzz $t: inputs in $work/crashes"
  elif [ "$rc" -ne 0 ]; then
    status=1
    grep -m1 -A12 'ERROR\|fuzz:' "$work/log"
    echo "fuzz $t: inputs in $work/crashes"
  fi
done
exit $status
