#!/usr/bin/env python3
"""Compares perf profiles of stream runs per Gbit moved: for each LABEL=PERF_DATA=GBIT, the samples
of each symbol divided by the Gbit the run moved (pinned.py prints it), the top symbols side by
side. Samples per Gbit, not percentages, so a symbol that costs more per byte in one run shows
even when the runs' totals differ.

  per_gbit.py ferry=/tmp/f.data=141.3 nginx=/tmp/n.data=122.8 [--top 18]
"""
import argparse
import collections
import re
import subprocess


def samples_by_symbol(perf_data):
    out = subprocess.run(["perf", "report", "-i", perf_data, "--stdio", "--no-children", "--sort",
                          "sym", "--percent-limit", "0", "-q", "-F", "sample,sym"],
                         capture_output=True, text=True).stdout
    counts = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\[.\]\s+(\S+)", line)
        if m:
            counts[m.group(2)] += int(m.group(1))
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="LABEL=PERF_DATA=GBIT")
    p.add_argument("--top", type=int, default=18)
    a = p.parse_args()
    runs = []
    for item in a.runs:
        label, path, gbit = item.split("=")
        runs.append((label, samples_by_symbol(path), float(gbit)))
    ranked = collections.Counter()
    for _, counts, gbit in runs:
        for sym, n in counts.items():
            ranked[sym] += n / gbit
    print(f"{'samples per Gbit':40s} " + " ".join(f"{label:>12s}" for label, _, _ in runs))
    print(f"{'all':40s} " + " ".join(f"{sum(c.values()) / g:12.1f}" for _, c, g in runs))
    for sym, _ in ranked.most_common(a.top):
        print(f"{sym[:40]:40s} " + " ".join(f"{c[sym] / g:12.2f}" for _, c, g in runs))


if __name__ == "__main__":
    main()
