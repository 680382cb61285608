#!/bin/sh
# Builds prismlb three times (plain, ASan+UBSan, ThreadSanitizer), runs the
# whole test suite on the first two and the threaded suites (core,
# tcp_proxy) on the third; ends with one line "N passed, N failed".
# Usage: tests/run.sh   (installs missing Debian packages first)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/tests/setup.sh" test || exit 1

passed=0
failed=0
status=0

count() { # $1 = meson testlog.txt summary section
  ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$1" | tail -n1)
  bad=0
  for k in Fail 'Unexpected Pass' Timeout; do
    n=$(sed -n "s/^$k: *\([0-9]*\).*/\1/p" "$1" | tail -n1)
    bad=$((bad + ${n:-0}))
  done
  passed=$((passed + ${ok:-0}))
  failed=$((failed + bad))
}

suite() { # $1 = build dir, $2 = meson test options, rest = meson setup options
  dir=$1; only=$2; shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    if ! meson setup "$dir" "$@" >"$dir-setup.log" 2>&1; then
      cat "$dir-setup.log"; status=1; failed=$((failed + 1)); return
    fi
  fi
  if ! ninja -C "$dir" >"$dir-ninja.log" 2>&1; then
    tail -n 60 "$dir-ninja.log"; status=1; failed=$((failed + 1)); return
  fi
  # shellcheck disable=SC2086 # $only is a list of options
  meson test -C "$dir" --print-errorlogs --num-processes 2 $only || status=1
  count "$dir/meson-logs/testlog.txt"
}

suite build ""
suite build-asan "" -Db_sanitize=address,undefined -Db_lundef=false
# ThreadSanitizer: the suites with threads (the core's worker loops and
# reactor, the proxy on its workers).
suite build-tsan "--suite core --suite tcp_proxy" -Db_sanitize=thread -Db_lundef=false

# Fuzzing: each libFuzzer target of tests/fuzz for 15 s under ASan+UBSan
# (clang; build-fuzz). A timed campaign explores differently on every run,
# so what it finds is printed (inputs left in build-fuzz/fuzz-out/) but does
# not decide the result: a finding becomes a regression input under
# tests/fuzz/regress/ with its fix, and meson test replays those in both
# builds. A campaign that cannot build or run is a failure.
if command -v clang >/dev/null 2>&1; then
  FUZZ_FINDINGS_FAIL=0 sh "$top/tests/fuzz/run.sh" 15
  case $? in
    0) passed=$((passed + 1)) ;;
    3) passed=$((passed + 1)); echo "fuzz: findings above are new: make each a regression input with its fix" ;;
    *) failed=$((failed + 1)); status=1 ;;
  esac
fi

echo "$passed passed, $failed failed"
exit $status
