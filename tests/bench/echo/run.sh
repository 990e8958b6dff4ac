#!/usr/bin/env bash
# The echo benchmark: echo-load against a TcpPlane (echo-host) for io_ready base (inbox), global
# and index at W = 1, 2, 4, 8, beside a single-threaded epoll echo server as the kernel-bound
# reference, in one run. Writes tests/bench/results/echo.md.
#
#   tests/bench/echo/run.sh [BUILD_DIR]      (default: build-bench, configured with -Dbench=true)
#
# Smaller runs through the environment: CONNECTIONS=1024 ROUNDS=1000 SIZE=64 WORKERS="1 2 4 8"
# MODES="inbox global index@1 index" (index@N: FERRY_TASK_INDEX_DRAIN=N, the batch drain measured
# against the default 4) LOAD_THREADS=1 REPEAT=3 (each row is the median of).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build-bench}
. "$here/bench_build.sh"
bench_build "$build" echo-load echo-host epoll-echo
# 1024 connections need ~1030 descriptors in each process.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec python3 "$here/bench.py" echo --bin "$build/tests/bench/echo" \
  --out "${OUT:-$root/tests/bench/results/echo.md}" \
  --connections "${CONNECTIONS:-1024}" --rounds "${ROUNDS:-1000}" --size "${SIZE:-64}" \
  --workers "${WORKERS:-1 2 4 8}" --modes "${MODES:-inbox global index@1 index}" \
  --load-threads "${LOAD_THREADS:-1}" --repeat "${REPEAT:-3}"
