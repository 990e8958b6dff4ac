#!/usr/bin/env bash
# Runs frame_bench (process_frame with full and partial checksums at 64 and 1500 B, a balanced
# request with the flow table off, on and full, the checksum classification every frame pays, a
# hold and release of 64 frames) and writes its table to
# tests/bench/results/frame.txt. No privileges.
# Usage: tests/bench/packet/run.sh [BUILD_DIR]   (configured with -Dbench=true; default build-bench)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
build="${1:-$root/build-bench}"
out="$root/tests/bench/results/frame.txt"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbench=true >/dev/null
fi
meson compile -C "$build" tests/bench/packet/frame_bench >/dev/null
{
  echo "# tests/bench/packet/run.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# median of 5 repetitions; the frame's 48 header bytes are restored each iteration (both kinds)"
  nice -n -15 "$build/tests/bench/packet/frame_bench" --benchmark_repetitions=5 \
    --benchmark_min_time=0.3 --benchmark_report_aggregates_only=true 2>/dev/null | grep -E "median|^Benchmark|^-"
} | tee "$out"
