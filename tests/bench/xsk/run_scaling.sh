#!/usr/bin/env bash
# Runs the multi-slab scaling benchmark (1, 2, 4, 8 workers on one shared UMEM) and writes its table
# to tests/bench/results/xsk-scaling.txt. Root (the UMEM is registered with the kernel).
# Usage: tests/bench/xsk/run_scaling.sh [BUILD_DIR]   (configured with -Dbench=true; default
# build-bench). NICE=-15 (process and session autogroup) by default so other load on a shared
# machine starves it less.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
build="${1:-$root/build-bench}"
out="$root/tests/bench/results/xsk-scaling.txt"
repetitions="${REPETITIONS:-5}"
nice_level="${NICE:--15}"

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbench=true >/dev/null
fi
if ! meson compile -C "$build" tests/bench/xsk/xsk_scaling_bench >/dev/null; then
  echo "run_scaling.sh: cannot build xsk_scaling_bench in $build (configure it with -Dbench=true)" >&2
  exit 1
fi
json="$(mktemp)"
trap 'rm -f "$json"' EXIT
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
# With sched_autogroup a nice value ranks a process only inside its session's group, and each
# session's group gets an equal share of the CPUs: run in a session of our own and nice the group.
setsid -w bash -c 'echo "$1" > /proc/self/autogroup 2>/dev/null; shift; exec nice -n "$0" "$@"' \
  "$nice_level" "$nice_level" "$build/tests/bench/xsk/xsk_scaling_bench" \
  --benchmark_repetitions="$repetitions" --benchmark_min_time=0.5 \
  --benchmark_format=json --benchmark_out="$json" --benchmark_out_format=json >/dev/null

mkdir -p "$(dirname "$out")"
cpu_model="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
python3 - "$json" "$repetitions" "$load_before" "$nice_level" "$cpu_model" >"$out" <<'PY'
import json, os, platform, statistics, sys, time

report = json.load(open(sys.argv[1]))
reps, load_before, nice_level = sys.argv[2], sys.argv[3], sys.argv[4]
runs = {}
for b in report["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    if b.get("error_occurred"):
        sys.exit(f"run_scaling.sh: {b['name']}: {b.get('error_message')}")
    runs.setdefault(b["threads"], []).append(b)

cpu = sys.argv[5] or "unknown CPU"
ncpu = report["context"]["num_cpus"]
print("# lib/xsk multi-slab scaling (tests/bench/xsk/run_scaling.sh): W worker threads, each on its own")
print("# slab of ONE shared, kernel-registered UmemPool (8 slabs x 4096 frames x 2048 bytes), moving 64-byte")
print("# UDP frames fill -> rx -> parse + reflect -> tx -> completion -> fill (recycle_completions) through")
print("# lib/xsk's ring code on user-space rings; the thread plays the kernel's side between its steps.")
print("# Every frame carries (flow, sequence); the end of the path checks strict per-flow FIFO order,")
print("# and after the run the slab's frame account must balance and offered == transmitted + drops.")
print(f"# {time.strftime('%Y-%m-%d %H:%M %Z')}  {cpu}, {ncpu} CPUs, kernel {platform.release()}, "
      f"nice {nice_level} (process and session autogroup),")
print(f"# load average {load_before} before, {' '.join(f'{x:.2f}' for x in os.getloadavg())} after")
print(f"# {reps} repetitions; Mpps = median. aggregate = frames of all threads / wall time; per CPU =")
print("# frames / CPU time of all threads (what one core does when it gets to run). With more workers than")
print(f"# the {ncpu} CPUs the threads share them: past {ncpu} workers the aggregate only grows by taking")
print("# CPU time from the machine's other load, and it always depends on how much of it there is.")
print()
print(f"{'workers':>7} {'aggregate Mpps':>15} {'x 1 worker':>10} {'per-CPU Mpps':>13} {'CPU ns/frame':>13} "
      f"{'frames':>13} {'drops':>6} {'FIFO errors':>11}")
base = None
for threads in sorted(runs):
    rs = runs[threads]
    agg = statistics.median(r["items_per_second"] for r in rs) / 1e6
    # cpu_time is CPU per iteration over all threads; frames/iterations is frames per iteration.
    cpu_ns = statistics.median(r["cpu_time"] / (r["frames"] / r["iterations"]) for r in rs)
    frames = sum(int(r["frames"]) for r in rs)
    drops = sum(int(r["drops"]) for r in rs)
    order = sum(int(r["order_errors"]) for r in rs)
    base = base or agg
    print(f"{threads:7} {agg:15.2f} {agg / base:10.2f} {1e3 / cpu_ns:13.2f} {cpu_ns:13.1f} "
          f"{frames:13,} {drops:6} {order:11}")
PY
cat "$out"
