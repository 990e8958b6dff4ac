#!/usr/bin/env python3
"""A report of tests/bench/lab/run.sh's side-by-side modes (AFFINITY, FERRYD_B, QUIC): one ferry
balance row per forwarder kind, medians of the alternated runs, each kind's gateway CPU per packet
over the baseline kind's.
Arguments: results.tsv HZ SECONDS LOAD_BEFORE REPEATS TITLE COMMAND NOTE BASELINE KIND...
(KIND in the order the rows are printed; BASELINE one of them)."""
import os, platform, statistics, sys, time

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
hz, secs, load_before, repeats = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
title, command, note, baseline, kinds = sys.argv[6], sys.argv[7], sys.argv[8], sys.argv[9], sys.argv[10:]
runs = {}
for kind, case, size, checksum, delivered, sent, seconds, si, fu, fs, busy, kdrop, wdrop, finished in rows:
    delivered = int(delivered)
    per = lambda ticks: ticks / hz * 1e9 / delivered if delivered else float("nan")
    runs.setdefault((int(size), checksum), {}).setdefault(kind, []).append(
        (delivered / float(seconds), per(int(si) + int(fu) + int(fs)), per(int(fu) + int(fs)),
         int(kdrop) + int(wdrop)))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"# Lab benchmark: {title}")
print()
print(f"`{command}`, {time.strftime('%Y-%m-%d %H:%M %Z')}: {cpu}, {os.cpu_count()} CPUs, kernel "
      f"{platform.release()}, {secs} s per run, {repeats} alternated rounds in one lab; load average "
      f"before / after: {load_before} / {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
print()
print(note + " Medians over the rounds; gateway = softirq + ferryd CPU per delivered packet, "
      "ferryd = ferryd's own user + system CPU per delivered packet; drops = frames the kernel "
      "dropped at ferry's sockets plus frames its worker dropped, all rounds.")
print()
print(f"| size | checksum | forwarder | delivered pps | gateway ns/pkt | ferryd ns/pkt | drops | runs (gateway ns/pkt) | / {baseline}, gateway ns/pkt |")
print("|---:|---|---|---:|---:|---:|---:|---|---:|")
for (size, checksum), by_kind in sorted(runs.items()):
    base = statistics.median(r[1] for r in by_kind.get(baseline, [(0, float("nan"), 0, 0)]))
    for kind in kinds:
        if kind not in by_kind:
            continue
        r = by_kind[kind]
        gw = statistics.median(x[1] for x in r)
        print(f"| {size} | {checksum} | {kind} | {statistics.median(x[0] for x in r):,.0f} | {gw:,.0f} | "
              f"{statistics.median(x[2] for x in r):,.0f} | {sum(x[3] for x in r):,} | "
              f"{', '.join(f'{x[1]:,.0f}' for x in r)} | {gw / base:.3f} |")
