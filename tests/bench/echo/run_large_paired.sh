#!/usr/bin/env bash
# 64 against 256 connections of 64 KiB responses, ring credit on (64 KiB, the default) and off,
# back to back for ROUNDS rounds against one epoll-echo: the throughput comparison of issue 4,
# paired so that load from other processes hits every configuration alike. Prints one line per
# run (round cap connections Gbps CQEs/response ENOBUFS system-CPU%) and the medians.
#
#   tests/bench/echo/run_large_paired.sh [BUILD_DIR]   (default: build-bench; -Dbench=true)
#
# Environment: ROUNDS=9 TOTAL_MIB=8192 OUT=FILE (the per-run lines).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build-bench}
. "$here/bench_build.sh"
bench_build "$build" large-recv epoll-echo
bin=$build/tests/bench/echo
out=${OUT:-$root/tests/bench/results/large-paired.txt}
port_file=$(mktemp)
"$bin/epoll-echo" --response-bytes 65536 >"$port_file" &
echo_pid=$!
trap 'kill $echo_pid 2>/dev/null; rm -f "$port_file"' EXIT
for _ in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
port=$(awk '{print $2}' "$port_file" | head -1)
: >"$out"
for round in $(seq "${ROUNDS:-9}"); do
  for cap in 65536 0; do
    for conns in 64 256; do
      "$bin/large-recv" --port "$port" --connections "$conns" --total-mib "${TOTAL_MIB:-8192}" \
        --cap-bytes "$cap" | tail -1 | python3 -c "import json, sys; d = json.load(sys.stdin); \
print($round, $cap, $conns, d['gbps'], d['cqes_per_response'], d['enobufs'], d['sys_cpu_pct'])" \
        >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, cap, conns, gbps, cqes, enobufs, _ = line.split()
    runs[(int(cap), int(conns))].append((float(gbps), float(cqes), int(enobufs)))
for (cap, conns), v in sorted(runs.items(), reverse=True):
    g = [x[0] for x in v]
    print(f"credit {cap or 'off':>5} {conns:>3} connections: median {statistics.median(g):.2f} Gbps "
          f"({min(g):.2f}-{max(g):.2f}), CQEs/response {statistics.median(x[1] for x in v):.3f}, "
          f"ENOBUFS per run {min(x[2] for x in v)}-{max(x[2] for x in v)}")
PY
