#!/usr/bin/env bash
# Runs quic_lb_bench (QuicLbService::route on a short-header datagram, each algorithm and AES
# engine) and writes its table to tests/bench/results/quic_lb.txt. No privileges.
# Usage: tests/bench/quic/run.sh [BUILD_DIR]   (configured with -Dbench=true; default build-bench)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
build="${1:-$root/build-bench}"
out="$root/tests/bench/results/quic_lb.txt"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbench=true >/dev/null
fi
meson compile -C "$build" tests/bench/quic/quic_lb_bench >/dev/null
{
  echo "# tests/bench/quic/run.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# median of 5 repetitions, one thread"
  nice -n -15 "$build/tests/bench/quic/quic_lb_bench" --benchmark_repetitions=5 \
    --benchmark_min_time=0.3 --benchmark_report_aggregates_only=true 2>/dev/null | grep -E "median|^Benchmark|^-"
} | tee "$out"
