#!/bin/sh
# Builds the Debian source package and the binary packages prismlb and
# prismlb-dev from this tree with dpkg-buildpackage, and runs lintian on
# them. packaging/debian/ becomes the package's debian/ directory (with
# packaging/systemd/prismlb@.service as debian/prismlb@.service).
# Usage: packaging/debian/build.sh [OUT]   (default: build-deb/)
# The packages and lintian's report (OUT/lintian.txt) land in OUT.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -S Version)
src=$out/prismlb-$version
rm -rf "$src" "$out"/prismlb_* "$out"/prismlb-dev_*
mkdir -p "$src"
# The tracked files (and new ones not ignored), as a source tarball has them.
(cd "$top" && git ls-files -co --exclude-standard -z | grep -zv '^packaging/debian/' \
  | xargs -0 cp --parents -t "$src")
cp -r "$top/packaging/debian" "$src/debian"
rm -f "$src/debian/build.sh"
cp "$top/packaging/systemd/prismlb@.service" "$src/debian/prismlb@.service"
(cd "$src" && dpkg-buildpackage -us -uc) > "$out/dpkg-buildpackage.log" 2>&1 || {
  tail -n 60 "$out/dpkg-buildpackage.log"; exit 1; }
changes=$(ls "$out"/prismlb_"$version"_*.changes)
lintian --info --display-info --pedantic "$changes" "$out/prismlb_$version.dsc" > "$out/lintian.txt" 2>&1 || true
cat "$out/lintian.txt"
ls "$out"/*.deb "$out"/*.dsc
if grep -q '^E: ' "$out/lintian.txt"; then
  echo "build.sh: lintian reports errors" >&2
  exit 1
fi
