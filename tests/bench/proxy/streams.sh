#!/usr/bin/env bash
# The TCP proxy benchmark's long streams: iperf3 -P 1 and -P 4, each direction, through ferryd,
# HAProxy and nginx stream side by side in one run (streams.py says how). Writes
# tests/bench/results/streams.md. Not part of make test; root (nginx starts its workers as nobody).
#
#   tests/bench/proxy/streams.sh [BUILD_DIR]          (default: build; ferryd must be built)
#
# Environment: WORKERS="1 2" DURATION_S=5 REPEAT=3 PROXIES="ferry haproxy nginx" NICE=-15
# SHAPES="up-P1 up-P4 down-P1 down-P4" OUT=FILE, FERRYD_B=PATH (a second ferryd beside the
# first, `ferry-b` in the report: an A/B of two builds in one run), CC=NAME (the TCP congestion
# control for the run, e.g. cubic; the one before is put back). About 5 minutes by default.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build}
[ -x "$build/daemon/ferryd" ] || { echo "streams.sh: no $build/daemon/ferryd; build it first" >&2; exit 1; }
case " ${PROXIES:-} " in
  *" floor-"*) [ -x "$build/tests/bench/proxy/floor-proxy" ] || {
    echo "streams.sh: the floor kinds need $build/tests/bench/proxy/floor-proxy (meson configure -Dbench=true, then build it)" >&2
    exit 1; } ;;
esac
command -v iperf3 >/dev/null || { echo "streams.sh: iperf3 missing (apt-get install iperf3)" >&2; exit 1; }
if pgrep -a -x haproxy || pgrep -a -x nginx || pgrep -a -x iperf3; then
  echo "streams.sh: stop the haproxy/nginx/iperf3 processes above first (they are not this benchmark's)" >&2
  exit 1
fi
exec setsid -w python3 "$here/streams.py" --ferryd "$build/daemon/ferryd" \
  ${FERRYD_B:+--ferryd-b "$FERRYD_B"} --out "${OUT:-$root/tests/bench/results/streams.md}" \
  --workers "${WORKERS:-1 2}" --duration-s "${DURATION_S:-5}" --repeat "${REPEAT:-3}" \
  --proxies "${PROXIES:-ferry haproxy nginx}" --nice "${NICE:--15}" \
  --shapes "${SHAPES:-up-P1 up-P4 down-P1 down-P4}" --congestion-control "${CC:-}"
