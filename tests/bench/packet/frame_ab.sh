#!/usr/bin/env bash
# A/B of process_frame() between a revision and the working tree in one run (not part of make
# test): builds frame_bench of REV_A in a temporary worktree and of this tree (both -Dbench=true),
# then runs BM_ProcessFrame (and the tree's BM_ProcessFrameHinted) of each alternately ROUNDS
# times on one CPU and writes the medians to tests/bench/results/frame-ab.md.
#   tests/bench/packet/frame_ab.sh REV_A [ROUNDS]
# AB_WORKTREE=DIR keeps REV_A's worktree and build there (built once, reused by the next run).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
rev=${1:?usage: $0 REV_A [ROUNDS]}; rounds=${2:-5}
out="$root/tests/bench/results/frame-ab.md"
work=$(mktemp -d /tmp/ferry-frame-ab.XXXXXX)
side_a=${AB_WORKTREE:-$work/a}
cleanup() {
  [ -n "${AB_WORKTREE:-}" ] || git -C "$root" worktree remove --force "$side_a" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -d "$side_a" ] || git -C "$root" worktree add --detach "$side_a" "$rev" >/dev/null 2>&1
[ "$(git -C "$side_a" rev-parse HEAD)" = "$(git -C "$root" rev-parse "$rev")" ] ||
  { echo "frame_ab.sh: $side_a is not at $rev" >&2; exit 1; }
for side in "$side_a" "$root"; do
  build="$side/build-bench"
  [ -f "$build/build.ninja" ] || meson setup "$build" "$side" -Dbench=true >/dev/null
  meson compile -C "$build" tests/bench/packet/frame_bench >/dev/null
done
run() {  # run BINARY SIDE: the CSV of BM_ProcessFrame*, medians of 3 repetitions
  taskset -c 1 "$1" --benchmark_filter='BM_ProcessFrame' --benchmark_repetitions=3 \
    --benchmark_min_time=0.3 --benchmark_report_aggregates_only=true --benchmark_format=csv \
    2>/dev/null | grep '_median' | sed "s/^/$2,/"
}
raw="$work/raw.csv"
for r in $(seq "$rounds"); do
  run "$side_a/build-bench/tests/bench/packet/frame_bench" a >>"$raw"
  run "$root/build-bench/tests/bench/packet/frame_bench" b >>"$raw"
done
python3 - "$raw" "$rev" "$rounds" >"$out" <<'PY'
import csv, statistics, sys
raw, rev, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
# side, name, iterations, real_time, cpu_time, time_unit, bytes/s, items/s, label, ...
by = {}
for row in csv.reader(open(raw)):
    side, cpu_ns, label = row[0], float(row[4]), row[8]
    by.setdefault(label, {}).setdefault(side, []).append(cpu_ns)
print(f"# process_frame() A/B: {rev} (a) vs the working tree (b), {rounds} alternated rounds, "
      "one CPU, ns per frame (median of the rounds' medians)\n")
print("| frame | a: " + rev + " | b: tree | b / a |")
print("|---|---:|---:|---:|")
for key, sides in by.items():
    a = statistics.median(sides["a"]) if "a" in sides else None
    b = statistics.median(sides["b"]) if "b" in sides else None
    ratio = f"{b / a:.3f}" if a and b else ""
    print(f"| {key} | {a:.1f} | {b:.1f} | {ratio} |" if a else f"| {key} | | {b:.1f} | |")
PY
cat "$out"
