#!/bin/sh
# Fails when a C file under core/, modules/ or tests/ differs from what
# clang-format makes of it with the project's .clang-format. Fix with:
#   sh tests/lint/clang-format.sh fix
# Hand-aligned tables may sit between "clang-format off" and "on" comments.
set -u
mode=check
case "${1:-}" in
  fix) mode=fix; shift ;;
esac
root=${1:-${PRISMLB_SOURCE_ROOT:-.}}
cd "$root" || exit 1
if ! command -v clang-format >/dev/null 2>&1; then
  echo "clang-format not found (tests/setup.sh installs it)"
  exit 1
fi
files=$(find core modules tests -name '*.[ch]' -type f | sort)
if [ "$mode" = fix ]; then
  # shellcheck disable=SC2086
  exec clang-format -i --style=file $files
fi
# shellcheck disable=SC2086
if ! out=$(clang-format --dry-run -Werror --style=file $files 2>&1); then
  printf '%s\n' "$out" | grep -E '^[^ ].*(warning|error):' | cut -d: -f1 | sort -u \
    | sed 's/^/not formatted: /'
  echo "run: sh tests/lint/clang-format.sh fix"
  exit 1
fi
echo "$(printf '%s\n' "$files" | wc -l) files formatted"
