#!/bin/bash
# Runs one libFuzzer target for a bounded time: new inputs go to WORK_DIR/corpus (the committed
# seeds stay as they are), a crashing input to WORK_DIR/crashes/, and the run fails on any finding.
# A dictionary tests/fuzz/dict/<seed dir name>.dict, when there is one, is passed with -dict.
# Usage: run_fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS   (FUZZ_SECONDS overrides SECONDS)
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 FUZZER SEED_DIR WORK_DIR SECONDS" >&2
  exit 2
fi
fuzzer=$1 seeds=$2 work=$3 seconds=${FUZZ_SECONDS:-$4}
[ -d "$seeds" ] || { echo "$0: no seed corpus at $seeds" >&2; exit 2; }
mkdir -p "$work/corpus" "$work/crashes"
dict=$(dirname "$0")/dict/$(basename "$seeds").dict
dict_arg=()
[ -f "$dict" ] && dict_arg=(-dict="$dict")
echo "$(basename "$fuzzer"): ${seconds} s, seeds $seeds, corpus $work/corpus"
# -timeout: one input taking 10 s is a hang and counts as a finding. The outer timeout is a
# backstop only, for a fuzzer that stops honouring -max_total_time. A finding exits 1: libFuzzer's
# own 77 is what meson reads as "skipped", so a crash would have passed as a skip.
exec timeout --kill-after=10 $((seconds + 120)) "$fuzzer" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$work/crashes/" "${dict_arg[@]}" "$work/corpus" "$seeds"
