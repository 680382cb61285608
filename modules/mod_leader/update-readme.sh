#!/bin/sh
# Regenerates the settings reference in README.md (between the
# settings:begin and settings:end markers) from the module's own settings
# table, as `prismlb --settings-doc leader` renders it. The leader-config
# test fails while README.md differs from that rendering.
# Usage: modules/mod_leader/update-readme.sh BUILD_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: $0 BUILD_DIR}
doc=$(mktemp)
trap 'rm -f "$doc" "$doc.new"' EXIT
PRISMLB_MODULE_PATH="$build/modules" "$build/core/prismlb" --settings-doc leader >"$doc"
awk -v doc="$doc" '
  /<!-- settings:begin -->/ { print; while ((getline l < doc) > 0) print l; skip = 1; next }
  /<!-- settings:end -->/   { skip = 0 }
  !skip
' "$here/README.md" >"$doc.new"
cat "$doc.new" >"$here/README.md"
