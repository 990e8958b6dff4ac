#!/usr/bin/env bash
# One Google Benchmark binary's medians as a results table, for the micro-benchmarks' run.sh
# scripts (no privileges): builds TARGET in BUILD_DIR (set up with -Dbench=true on first use), runs
# it at nice -15 for 5 repetitions and writes the median rows to tests/bench/results/RESULT.
# Usage: tests/bench/common/micro.sh BUILD_DIR TARGET RESULT NOTE
#   TARGET: the meson target path (tests/bench/packet/frame_bench), RESULT: frame.txt,
#   NOTE: one line on what the figures are, written under the header.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
build="$1" target="$2" result="$3" note="$4"
out="$root/tests/bench/results/$result"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbench=true >/dev/null
fi
meson compile -C "$build" "$target" >/dev/null
{
  echo "# tests/bench/$(basename "$(dirname "$target")")/run.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# $note"
  nice -n -15 "$build/$target" --benchmark_repetitions=5 --benchmark_min_time=0.3 \
    --benchmark_report_aggregates_only=true 2>/dev/null | grep -E "median|^Benchmark|^-"
} | tee "$out"
