#!/bin/sh
# packaging/systemd/prismlb@.service: `systemd-analyze verify` accepts it
# (for prismlb@proxy, with ExecStart pointed at the build's binary, since
# /usr/sbin/prismlb is not installed here) and `systemd-analyze security
# --offline=yes` rates its exposure at most 2.0.
# Usage: systemd.sh SOURCE_ROOT BUILD_ROOT
set -u
src=$1 build=$2
command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: no systemd-analyze"; exit 77; }
unit=$src/packaging/systemd/prismlb@.service
dir=$(mktemp -d "${TMPDIR:-/tmp}/pkgunit-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
status=0

sed "s#/usr/sbin/prismlb#$build/core/prismlb#g" "$unit" > "$dir/prismlb@proxy.service"
if systemd-analyze verify --man=no "$dir/prismlb@proxy.service" > "$dir/verify" 2>&1 \
   && [ ! -s "$dir/verify" ]; then
  echo "ok   systemd-analyze verify"
else
  echo "FAIL systemd-analyze verify:"; cat "$dir/verify"; status=1
fi

cp "$unit" "$dir/prismlb@proxy.service"
systemd-analyze security --offline=yes "$dir/prismlb@proxy.service" > "$dir/security" 2>&1
grep '✗' "$dir/security"
score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$dir/security")
if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'; then
  echo "ok   systemd-analyze security --offline=yes: $score"
else
  echo "FAIL systemd-analyze security: exposure '${score:-?}' (want <= 2.0)"; cat "$dir/security"
  status=1
fi
exit $status
