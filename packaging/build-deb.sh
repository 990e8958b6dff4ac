#!/usr/bin/env bash
# Builds the ferry .deb from this checkout: copies the source tree (tracked and new files, no build
# dirs) with packaging/debian as debian/ into a scratch dir and runs dpkg-buildpackage -us -uc -b.
#
#   packaging/build-deb.sh [OUTDIR]      (default OUTDIR: build-deb/ in the checkout)
#
# Leaves OUTDIR/ferry_VERSION_ARCH.deb (and the .buildinfo/.changes) and prints the .deb's path
# as the last line. Compiler results are cached with ccache when it is installed, in the invoking
# user's ccache dir (debhelper points HOME elsewhere, so the dir is fixed here), which makes a
# rebuild of an unchanged tree take seconds.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/build-deb}" && cd "${1:-$ROOT/build-deb}" && pwd)
VERSION=$(dpkg-parsechangelog -l "$ROOT/packaging/debian/changelog" -S Version)
# A fixed staging path: it ends up in the compiler flags (-ffile-prefix-map), so a fixed one lets
# ccache reuse the last build's objects. One build at a time holds it.
STAGE=${FERRY_DEB_STAGE:-${TMPDIR:-/tmp}/ferry-deb-stage}
exec 9>"$STAGE.lock"
flock 9
rm -rf "$STAGE"
mkdir -p "$STAGE"
trap 'rm -rf "$STAGE"' EXIT

if ! missing=$(dpkg-checkbuilddeps "$ROOT/packaging/debian/control" 2>&1); then
  echo "build-deb: $missing" >&2
  echo "build-deb: install them with apt-get install (Debian bookworm packages)" >&2
  exit 1
fi

SRC=$STAGE/ferry-$VERSION
mkdir -p "$SRC"
# The files git knows about or would add (so uncommitted work is packaged too), never build dirs;
# a tracked file deleted in the work tree is skipped.
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
  xargs -0 cp --parents -t "$SRC")
rm -rf "$SRC/debian"
cp -r "$ROOT/packaging/debian" "$SRC/debian"

if command -v ccache >/dev/null; then
  CCACHE_DIR=${CCACHE_DIR:-$(ccache -k cache_dir)}
  # Paths relative to the staging dir, and no cwd in the hash.
  export CCACHE_DIR CCACHE_BASEDIR=$SRC CCACHE_NOHASHDIR=1
fi

started=$(date +%s)
(cd "$SRC" && nice dpkg-buildpackage -us -uc -b -j"${FERRY_DEB_JOBS:-2}") >"$STAGE/build.log" 2>&1 || {
  tail -n 60 "$STAGE/build.log" >&2
  echo "build-deb: dpkg-buildpackage failed (last 60 lines above)" >&2
  exit 1
}
for f in "$STAGE"/*.deb "$STAGE"/*.buildinfo "$STAGE"/*.changes; do
  [ -e "$f" ] && cp "$f" "$OUT/"
done
cp "$STAGE/build.log" "$OUT/build.log"
echo "build-deb: built in $(( $(date +%s) - started )) s" >&2
ls "$OUT"/ferry_"$VERSION"_*.deb
