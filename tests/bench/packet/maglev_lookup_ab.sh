#!/usr/bin/env bash
# A/B of MaglevTable::lookup between two revisions in one run (not part of make test): builds
# maglev_lookup_ab.cc against lib/packet/maglev.{hh,cc} of REV_A and of the working tree, and runs
# them alternately ROUNDS times on one CPU. Same sums = same answers.
#   tests/bench/packet/maglev_lookup_ab.sh REV_A [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
rev=${1:?usage: $0 REV_A [ROUNDS]}; rounds=${2:-5}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/a/lib/packet" "$work/b/lib/packet"
git -C "$root" show "$rev:lib/packet/maglev.hh" >"$work/a/lib/packet/maglev.hh"
git -C "$root" show "$rev:lib/packet/maglev.cc" >"$work/a/lib/packet/maglev.cc"
cp "$root/lib/packet/maglev.hh" "$root/lib/packet/maglev.cc" "$work/b/lib/packet/"
for v in a b; do
  g++ -std=c++20 -O2 -I"$work/$v" -I"$root" "$work/$v/lib/packet/maglev.cc" \
    "$root/tests/bench/packet/maglev_lookup_ab.cc" -o "$work/bench_$v"
done
for r in $(seq "$rounds"); do
  printf '%s %d: ' "$rev" "$r"; taskset -c 1 "$work/bench_a"
  printf 'tree %d: ' "$r"; taskset -c 1 "$work/bench_b"
done
