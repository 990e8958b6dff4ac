#!/usr/bin/env bash
# Runs the lib/xsk micro-benchmarks and writes their table to tests/bench/results/xsk-micro.txt.
# Usage: tests/bench/xsk/run.sh [BUILD_DIR]   (BUILD_DIR configured with -Dbench=true; default
# build-bench, set up on first use). Not part of the test suites: numbers, not pass/fail.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
build="${1:-$root/build-bench}"
out="$root/tests/bench/results/xsk-micro.txt"
repetitions="${REPETITIONS:-5}"

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbench=true >/dev/null
fi
if ! meson compile -C "$build" xsk_micro_bench >/dev/null; then
  echo "run.sh: cannot build xsk_micro_bench in $build (configure it with -Dbench=true)" >&2
  exit 1
fi
json="$(mktemp)"
trap 'rm -f "$json"' EXIT
"$build/tests/bench/xsk/xsk_micro_bench" --benchmark_repetitions="$repetitions" \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
  --benchmark_format=json --benchmark_out="$json" --benchmark_out_format=json >/dev/null

mkdir -p "$(dirname "$out")"
python3 - "$json" "$repetitions" >"$out" <<'PY'
import json, os, platform, sys, time

report = json.load(open(sys.argv[1]))
reps = sys.argv[2]
median = {}
for b in report["benchmarks"]:
    if b.get("aggregate_name") == "median":
        name, batch = b["run_name"].rsplit("/", 1)
        median[(name, int(batch))] = b

rows = [  # (label, ferry benchmark, memcpy baseline)
    ("ring round trip, fill/completion (u64)", "BM_RingRoundTrip<std::uint64_t>", "BM_MemcpyRoundTrip<std::uint64_t>"),
    ("ring round trip, rx/tx (xdp_desc)", "BM_RingRoundTrip<xdp_desc>", "BM_MemcpyRoundTrip<xdp_desc>"),
    ("recycle_completions (ring to ring)", "BM_RecycleCompletions", "BM_MemcpyRecycle"),
    ("slab alloc+free, ownership check on", "BM_SlabAllocFree<OwnershipCheck::on>", "BM_MemcpySlab"),
    ("slab alloc+free, ownership check off", "BM_SlabAllocFree<OwnershipCheck::off>", "BM_MemcpySlab"),
]
ctx = report["context"]
cpu = "unknown CPU"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
print("# lib/xsk micro-benchmarks (tests/bench/xsk/run.sh), user-space rings, one thread")
print(f"# {time.strftime('%Y-%m-%d %H:%M %Z')}  {cpu}, {ctx['num_cpus']} CPUs, kernel {platform.release()}, "
      f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
print(f"# median of {reps} repetitions, CPU time. Mops/s = million entries per second through the operation")
print("# (a ring round trip pushes and pops every entry once: reserve, slice copy, submit, peek, slice copy,")
print("# release). memcpy = plain memcpy of the same bytes (twice for a round trip, once for recycling,")
print("# out and back for the slab); ratio = ferry / memcpy.")
print()
print(f"{'operation':40} {'batch':>5} {'ns/batch':>9} {'Mops/s':>9} {'memcpy Mops/s':>14} {'ratio':>6}")
for label, name, base in rows:
    for batch in (1, 8, 32, 64):
        b, m = median.get((name, batch)), median.get((base, batch))
        if not b or not m:
            continue
        mops = b["items_per_second"] / 1e6
        base_mops = m["items_per_second"] / 1e6
        ns = b["cpu_time"] if b["time_unit"] == "ns" else float("nan")
        print(f"{label:40} {batch:5} {ns:9.1f} {mops:9,.0f} {base_mops:14,.0f} {mops / base_mops:6.2f}")
    print()

def mops(name, batch):
    return median[(name, batch)]["items_per_second"] / 1e6

ring32 = mops("BM_RingRoundTrip<std::uint64_t>", 32)
ratio32 = ring32 / mops("BM_MemcpyRoundTrip<std::uint64_t>", 32)
rec32 = mops("BM_RecycleCompletions", 32)
def verdict(ok):
    return "met" if ok else "NOT met"
print("targets (issue 3):")
print(f"  ring batch-32 >= 4,057 Mops/s: {ring32:,.0f} Mops/s ({verdict(ring32 >= 4057)}; "
      f"{2 * ring32:,.0f} M single push-or-pop entry operations/s)")
print(f"  ring batch-32 >= 0.5x memcpy: {ratio32:.2f}x ({verdict(ratio32 >= 0.5)})")
print(f"  recycle batch-32 >= 1,063 Mops/s: {rec32:,.0f} Mops/s ({verdict(rec32 >= 1063)})")
PY
cat "$out"
