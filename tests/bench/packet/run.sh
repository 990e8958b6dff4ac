#!/usr/bin/env bash
# Runs frame_bench (process_frame with full and partial checksums at 64 and 1500 B, a balanced
# request with the flow table off, on and full, the checksum classification every frame pays, a
# hold and release of 64 frames) and writes its table to
# tests/bench/results/frame.txt. No privileges.
# Usage: tests/bench/packet/run.sh [BUILD_DIR]   (configured with -Dbench=true; default build-bench)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
exec "$root/tests/bench/common/micro.sh" "${1:-$root/build-bench}" tests/bench/packet/frame_bench \
  frame.txt "median of 5 repetitions; the frame's 48 header bytes are restored each iteration (both kinds)"
