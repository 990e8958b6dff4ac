# Sourced by the echo benchmark scripts: configures BUILD_DIR with -Dbench=true (setting it up
# first if needed) and compiles only the given targets.
#   bench_build BUILD_DIR TARGET...
bench_build() {
  local build=$1
  shift
  [ -f "$build/build.ninja" ] || meson setup "$build" -Dbench=true
  meson configure "$build" -Dbench=true >/dev/null
  meson compile -C "$build" -j 2 "$@" >/dev/null
}
