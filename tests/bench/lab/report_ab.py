#!/usr/bin/env python3
"""The FERRYD_B report of tests/bench/lab/run.sh: this tree's ferryd, the same with
FERRY_XSK_IGNORE_XDP_MATCH=1 and another build's, balance rows, medians of the alternated runs.
Arguments: results.tsv HZ SECONDS LOAD_BEFORE REPEATS OTHER_FERRYD."""
import os, statistics, sys, time
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
hz, secs, load_before, repeats, other = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
runs = {}
for kind, case, size, checksum, delivered, sent, seconds, si, fu, fs, busy, kdrop, wdrop, finished in rows:
    delivered = int(delivered)
    gw = (int(si) + int(fu) + int(fs)) / hz * 1e9 / delivered if delivered else float("nan")
    runs.setdefault((int(size), checksum), {}).setdefault(kind, []).append((delivered / float(seconds), gw))
print("# Lab benchmark: this tree's ferryd next to another build's, balance")
print()
print(f"`FERRYD_B={other} tests/bench/lab/run.sh`, {time.strftime('%Y-%m-%d %H:%M %Z')}, {secs} s per run, "
      f"{repeats} alternated rounds; load before / after: {load_before} / "
      f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}. `tree-no-hint`: this tree with "
      "FERRY_XSK_IGNORE_XDP_MATCH=1. Medians; gateway = softirq + ferryd CPU per delivered packet.")
print()
print("| size | checksum | forwarder | delivered pps | gateway ns/pkt | runs (gateway ns/pkt) | / other, gateway ns/pkt |")
print("|---:|---|---|---:|---:|---|---:|")
for (size, checksum), kinds in sorted(runs.items()):
    base = statistics.median(g for _, g in kinds.get("other", [(0, float("nan"))]))
    for kind in ("tree", "tree-no-hint", "other"):
        if kind not in kinds:
            continue
        pps = statistics.median(p for p, _ in kinds[kind])
        gw = statistics.median(g for _, g in kinds[kind])
        each = ", ".join(f"{g:,.0f}" for _, g in kinds[kind])
        print(f"| {size} | {checksum} | {kind} | {pps:,.0f} | {gw:,.0f} | {each} | {gw / base:.3f} |")
