#!/usr/bin/env bash
# The TCP proxy benchmark: ferryd vs HAProxy (mode tcp) vs nginx stream, between the same
# proxy-load client and proxy-backend, same worker count, side by side in one run. Writes
# tests/bench/results/proxy.md.
#
#   tests/bench/proxy/run.sh [BUILD_DIR]   (default: build-bench-proxy, configured -Dbench=true)
#
# Environment: WORKERS="2 1" DURATION_S=3 REPEAT=3 IDLE_CONNECTIONS=9900 IDLE_WORKERS=2 FERRYD_B=PATH
# LOAD_THREADS=1 NICE=-15 PROXIES="direct ferry haproxy haproxy-splice nginx" OUT=FILE.
# Runs as root (nginx starts its workers as nobody); needs haproxy, nginx and libnginx-mod-stream
# from Debian, and no other haproxy/nginx. About 9 minutes with the defaults.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build-bench-proxy}
[ -f "$build/build.ninja" ] || meson setup "$build" -Dbench=true
meson configure "$build" -Dbench=true >/dev/null
meson compile -C "$build" -j 2 proxy-load proxy-backend floor-proxy daemon/ferryd >/dev/null

# A packaged (or forgotten) haproxy/nginx would share the cores and blur the figures.
if pgrep -a -x haproxy || pgrep -a -x nginx; then
  echo "run.sh: stop the haproxy/nginx processes above first (they are not this benchmark's)" >&2
  exit 1
fi
# Idle connections need two descriptors each in the proxy; every process takes the hard limit.
ulimit -n "$(ulimit -Hn)"
exec setsid -w python3 "$here/proxy_bench.py" --bin "$build/tests/bench/proxy" --ferryd "$build/daemon/ferryd" \
  --out "${OUT:-$root/tests/bench/results/proxy.md}" --workers "${WORKERS:-2 1}" \
  --duration-s "${DURATION_S:-3}" --repeat "${REPEAT:-3}" --idle-workers "${IDLE_WORKERS:-2}" \
  --idle-connections "${IDLE_CONNECTIONS:-9900}" --load-threads "${LOAD_THREADS:-1}" \
  --proxies "${PROXIES:-direct ferry haproxy haproxy-splice nginx}" --nice "${NICE:--15}" \
  ${FERRYD_B:+--ferryd-b "$FERRYD_B"}
