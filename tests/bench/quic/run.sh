#!/usr/bin/env bash
# Runs quic_lb_bench (QuicLbService::route on a short-header datagram, each algorithm and AES
# engine) and writes its table to tests/bench/results/quic_lb.txt. No privileges.
# Usage: tests/bench/quic/run.sh [BUILD_DIR]   (configured with -Dbench=true; default build-bench)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
exec "$root/tests/bench/common/micro.sh" "${1:-$root/build-bench}" tests/bench/quic/quic_lb_bench \
  quic_lb.txt "median of 5 repetitions, one thread"
