#!/usr/bin/env bash
# The large-response benchmark: 64 KiB responses to 64 and 256 connections, received on the TCP
# runtime (256 x 16 KiB buffer ring per worker) with bundles + incremental rings (streaming or
# whole-response consumer, with and without the 64 KiB per-recv ring credit), without bundles,
# and without either, plus bundles with a ring large enough for every in-flight response (1024 x
# 16 KiB), side by side in one run. Writes tests/bench/results/large.md.
#
#   tests/bench/echo/run_large.sh [BUILD_DIR]   (default: build-bench, configured with -Dbench=true)
#
# Environment: TOTAL_MIB=4096 (per run) CONNECTIONS="64 256" RESPONSE_BYTES=65536 WORKERS=2
# REPEAT=3 (each row is the median of).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build-bench}
. "$here/bench_build.sh"
bench_build "$build" large-recv epoll-echo
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec python3 "$here/bench.py" large --bin "$build/tests/bench/echo" \
  --out "${OUT:-$root/tests/bench/results/large.md}" \
  --total-mib "${TOTAL_MIB:-4096}" --large-connections "${CONNECTIONS:-64 256}" \
  --response-bytes "${RESPONSE_BYTES:-65536}" --large-workers "${WORKERS:-2}" \
  --repeat "${REPEAT:-3}"
