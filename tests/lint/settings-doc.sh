#!/bin/sh
# Keeps a README's settings reference equal to what the daemon renders from
# the settings table itself (prismlb --settings-doc NAME), between the
# markers <!-- settings[:NAME]:begin --> and <!-- settings[:NAME]:end -->.
#
# Usage: settings-doc.sh check|update BUILD_DIR NAME README [MARKER]
#   NAME is a module name, or "core" for the top-level settings.
#   MARKER defaults to "settings" (so <!-- settings:begin -->).
set -eu
mode=${1:?usage}; build=${2:?usage}; name=${3:?usage}; readme=${4:?usage}
marker=${5:-settings}
doc=$(mktemp)
trap 'rm -f "$doc" "$doc.new"' EXIT
PRISMLB_MODULE_PATH="$build/modules" "$build/core/prismlb" --settings-doc "$name" >"$doc"
awk -v doc="$doc" -v b="<!-- $marker:begin -->" -v e="<!-- $marker:end -->" '
  index($0, b) { print; while ((getline l < doc) > 0) print l; skip = 1; found = 1; next }
  index($0, e) { skip = 0 }
  !skip { print }
  END { if (!found) exit 3 }
' "$readme" >"$doc.new" || { echo "$readme: no $marker markers" >&2; exit 1; }
case "$mode" in
  update) cat "$doc.new" >"$readme" ;;
  check)
    if ! cmp -s "$doc.new" "$readme"; then
      echo "$readme: the settings reference of $name is stale; run"
      echo "  sh tests/lint/settings-doc.sh update BUILD_DIR $name $readme $marker"
      diff -u "$readme" "$doc.new" || true
      exit 1
    fi
    echo "$readme: settings reference of $name is current" ;;
  *) echo "usage: $0 check|update BUILD_DIR NAME README [MARKER]" >&2; exit 2 ;;
esac
