#!/usr/bin/env python3
"""The default report of tests/bench/lab/run.sh: ferry route and balance next to the kernel and an
in-kernel XDP redirect, per size and checksum kind.
Arguments: results.tsv HZ SECONDS LOAD_BEFORE."""
import os, platform, sys, time
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
hz, secs, load_before = int(sys.argv[2]), sys.argv[3], sys.argv[4]
data = {}
for kind, case, size, checksum, delivered, sent, seconds, si, fu, fs, busy, kdrop, wdrop, finished in rows:
    delivered, sent, seconds = int(delivered), int(sent), float(seconds)
    si, fu, fs, busy = (int(x) / hz for x in (si, fu, fs, busy))
    per = lambda s: s * 1e9 / delivered if delivered else float("nan")
    data[(kind, case, int(size), checksum)] = {
        "pps": delivered / seconds, "sent_pps": sent / seconds,
        "loss": max(0.0, 1 - delivered / sent) if sent else 0.0,
        "si": si, "fu": fu, "fs": fs, "kdrop": int(kdrop), "wdrop": int(wdrop), "finished": int(finished), "delivered": delivered,
        "gw_ns": per(si + fu + fs), "busy_ns": per(busy)}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print("# Lab benchmark: ferry next to the kernel and an in-kernel XDP redirect")
print()
print(f"`tests/bench/lab/run.sh`, {time.strftime('%Y-%m-%d %H:%M %Z')}: {cpu}, {os.cpu_count()} CPUs, "
      f"kernel {platform.release()}, {secs} s per run; load average before / after: {load_before} / "
      f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (the machine is shared: other load lands in "
      "the machine column and can preempt ferry's worker).")
print()
print("Setup: client `c0` -- `g0` gateway `g1` -- `b0` sink, one queue per veth. trafgen on one CPU "
      "(at `nice -15`, like ferryd) offers UDP (cycling source ports) at its full rate; `delivered` is counted at the sink's veth "
      "(`rx_packets`, an XDP drop behind it). ferry: one AF_XDP worker, copy mode (veth has no "
      "zero-copy), pinned to the CPU trafgen does not use (`taskset -c 1`) at `nice -15` (the kernel's forwarding runs in softirq and preempts other load anyway; a deployment isolates the workers' CPUs); route = configured "
      "route (TTL-1, next hop from the kernel's neighbour table), balance = Maglev DNAT over 3 "
      "backends. kernel: ip_forward; balance with nftables DNAT (`jhash ip saddr . udp sport mod 3`, "
      "conntrack). xdp-redirect: MAC rewrite + DEVMAP redirect in the driver, no TTL, no DNAT "
      "(the ceiling for both cases).")
print()
print("Checksum column: what the UDP checksum field of the offered datagrams holds. `full`: a complete "
      "checksum (trafgen's own), what frames from a real NIC carry. `partial`: only the pseudo-header "
      "sum (folded, not complemented; trafgen writes it as a constant, `udp(csum=...)`), byte for byte "
      "what a local stack sending over veth with transmit checksum offload on (the default) leaves "
      "there (CHECKSUM_PARTIAL): what containers, pods, VMs and local backends send, and what ferry "
      "must complete when it rewrites a datagram. The kernel and xdp-redirect baselines forward either "
      "without completing the UDP checksum (conntrack's DNAT updates it incrementally); they run with "
      "both for the comparison. One difference the generator cannot carry: a local sender's datagram "
      "reaches the kernel as CHECKSUM_PARTIAL, which conntrack trusts, while trafgen's arrives as "
      "CHECKSUM_NONE, whose partial checksum conntrack would verify and reject (nothing DNATed); the "
      "kernel balance `partial` rows therefore run with `nf_conntrack_checksum=0` (the treatment real "
      "partial traffic gets), the `full` rows with the default 1 (conntrack verifies every checksum in "
      "software, which a NIC with receive checksum offload would spare it). Every ratio compares rows "
      "of the same size, case and checksum.")
print()
print("CPU columns, per delivered packet: `gateway` = softirq time of all CPUs (/proc/stat) + "
      "ferryd's user + system time; `machine` = all busy time of all CPUs (generator and sink "
      "included). The kernel accounts CPU time by ticks here (no IRQ_TIME_ACCOUNTING): softirq work "
      "that runs inline in ferryd's sendto() (the sink veth's receive, the tx path) is counted "
      "both as softirq and as ferryd's system time, so ferry's `gateway` figure is an upper bound; "
      "`machine` never double counts.")
print()
print("| size | case | checksum | forwarder | sent pps | delivered pps | loss | softirq s | ferryd user s | ferryd sys s | gateway ns/pkt | machine ns/pkt | ferry / this, pps | ferry / this, gateway ns/pkt |")
print("|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
notes = []
checksums = [c for c in ("partial", "full") if any(k[3] == c for k in data)]
for size in sorted({k[2] for k in data}):
    for case, checksum in ((c, s) for c in ("route", "balance") for s in checksums):
        f = data.get(("ferry", case, size, checksum))
        for kind in ("kernel", "ferry", "xdp-redirect"):
            d = data.get((kind, case, size, checksum))
            if not d:
                continue
            r_pps = f"{f['pps'] / d['pps']:.2f}" if f and d["pps"] else "-"
            r_cpu = f"{f['gw_ns'] / d['gw_ns']:.2f}" if f and d["gw_ns"] > 0 else "-"
            print(f"| {size} | {case} | {checksum} | {kind} | {d['sent_pps']:,.0f} | {d['pps']:,.0f} | "
                  f"{100 * d['loss']:.1f}% | {d['si']:.2f} | {d['fu']:.2f} | {d['fs']:.2f} | "
                  f"{d['gw_ns']:,.0f} | {d['busy_ns']:,.0f} | {r_pps} | {r_cpu} |")
            if kind == "ferry" and d["loss"] > 0:
                notes.append(f"ferry {case} {size} B {checksum} checksums lost {100 * d['loss']:.1f}%: {d['kdrop']:,} frames "
                             f"dropped by the kernel at its sockets (rx ring full / fill ring empty), "
                             f"{d['wdrop']:,} by the worker; the worker ran "
                             f"{d['fu'] + d['fs']:.2f} s of the {secs} s.")
for checksum in checksums:
    ferry = [d for k, d in data.items() if k[0] == "ferry" and k[3] == checksum]
    if ferry:
        finished, delivered = sum(d['finished'] for d in ferry), sum(d['delivered'] for d in ferry)
        notes.append(f"ferry, `{checksum}` rows: {finished:,} partial checksums "
                     f"finished (`ferry_xsk_checksums_finished_total{{kind=\"partial\"}}`) for "
                     f"{delivered:,} datagrams delivered"
                     + ((" (every one)" if finished == delivered else
                         " (the others reach their receivers with a checksum they drop)")
                        if checksum == "partial" else
                        ": only those whose complete checksum happens to equal the pseudo-header "
                        "sum (about 1 in 65,536 with the cycling ports), which ferry cannot tell "
                        "from a partial one; finished, they come out the same") + ".")
if notes:
    print()
    for n in notes:
        print(f"* {n}")
