#!/usr/bin/env python3
"""Direct server return next to the TCP proxy on long streams (called by run.sh): iperf3 -P 4
from a client to one backend through ferryd, once through an ipip service (the backend
decapsulates with ferry-decap and answers the client directly) and once through a TCP proxy
service of the same ferryd, and once straight to the backend without a gateway (`direct`), each
direction, in the DSR lab of the integration tests (tests/integration/dsr_lab.py: client, one-armed
gateway and backends on one bridge).

The figure is the gateway's CPU per GiB moved. ferryd's own CPU (user + system) is read from
/proc; the softirq work of the gateway's interfaces is charged to no process, so the gateway's
whole cost is also given as the machine's busy CPU of the run less that of the `direct` run of
the same direction and round: the client's and the server's work is the same in every run, what
is left is the gateway's. Writes a Markdown report (--out).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench", "proxy"))
import harness  # noqa: E402
import proxies  # noqa: E402
from dsr_lab import BACKENDS4, GW4, DsrLab, VIP4, dsr_config  # noqa: E402

PORT = 5201
VIP_PROXY = "10.50.202.10"  # the proxy service's VIP, on the gateway's loopback
GIB = 1 << 30
CLK_TCK = os.sysconf("SC_CLK_TCK")


def lab_config(w):
    backend = [f"{BACKENDS4[0]}:{PORT}"]  # one: iperf3 needs every stream of a test on its server
    return dsr_config(w, services=[
        {"name": "dsr", "vip": VIP4, "port": PORT, "protocols": ["tcp"], "forwarding": "ipip",
         "backends": backend},
        {"name": "proxy", "vip": VIP_PROXY, "port": PORT, "protocols": ["tcp"],
         "backends": backend},
    ])


def run_iperf(lab, target, reverse, seconds):
    cmd = ["ip", "netns", "exec", lab.client.name, "iperf3", "--client", target, "--port",
           str(PORT), "--parallel", "4", "--time", str(seconds), "--json"]
    out = subprocess.run(cmd + (["--reverse"] if reverse else []), capture_output=True, text=True,
                         timeout=seconds + 60)
    result = json.loads(out.stdout)
    if out.returncode != 0 or "error" in result:
        raise RuntimeError(f"iperf3 to {target}: {result.get('error', out.stderr.strip())}")
    return result["end"]["sum_received"]["bytes"]


def measure(lab, ferryd_pid, target, reverse, seconds):
    busy0, _, soft0 = proxies.machine_busy()
    cpu0 = proxies.cpu_seconds([ferryd_pid])
    moved = run_iperf(lab, target, reverse, seconds)
    busy1, _, soft1 = proxies.machine_busy()
    cpu1 = proxies.cpu_seconds([ferryd_pid])
    return {"bytes": moved, "busy_s": (busy1 - busy0) / CLK_TCK,
            "softirq_s": (soft1 - soft0) / CLK_TCK, "ferryd_s": cpu1 - cpu0}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    w = harness.Workdir()
    lab = DsrLab(w)
    rows = []
    try:
        lab.gw.run("ip", "addr", "add", f"{VIP_PROXY}/32", "dev", "lo")
        lab.client.run("ip", "route", "add", f"{VIP_PROXY}/32", "via", GW4)
        for ns in lab.backends[:1]:
            lab.spawn(ns, "iperf3", "iperf3", "--server", "--port", str(PORT))
        time.sleep(0.5)
        load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
        with harness.running(w, lab_config(w), netns=lab.gw.name) as d:
            pid = d.proc.pid
            for rnd in range(a.repeat):
                for direction, reverse in (("up", False), ("down", True)):
                    for path, target in (("direct", BACKENDS4[0]), ("dsr", VIP4),
                                         ("proxy", VIP_PROXY)):
                        r = measure(lab, pid, target, reverse, a.seconds)
                        r.update(path=path, direction=direction, round=rnd)
                        rows.append(r)
                        print(json.dumps(r), flush=True)
        load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    finally:
        lab.close()
        w.cleanup()
    report(a, rows, load_before, load_after)


def report(a, rows, load_before, load_after):
    direct = {(r["direction"], r["round"]): r for r in rows if r["path"] == "direct"}
    by = {}
    for r in rows:
        gib = r["bytes"] / GIB
        base = direct[(r["direction"], r["round"])]
        gateway = r["busy_s"] - base["busy_s"] * r["bytes"] / base["bytes"]
        by.setdefault((r["direction"], r["path"]), []).append(
            (r["bytes"] * 8 / 1e9 / a.seconds, r["ferryd_s"] / gib, gateway / gib,
             r["busy_s"] / gib))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    out = ["# Direct server return next to the TCP proxy: gateway CPU per GiB on long streams",
           "",
           f"`tests/bench/dsr/run.sh`, {time.strftime('%Y-%m-%d %H:%M %Z')}: {cpu}, "
           f"{os.cpu_count()} CPUs, kernel {platform.release()}, iperf3 -P 4 for {a.seconds} s, "
           f"{a.repeat} rounds; load average before / after: {load_before} / {load_after}.",
           "",
           "One ferryd on a one-armed gateway: `dsr` is an ipip service (the backend decapsulates "
           "with ferry-decap and answers the client directly), `proxy` a TCP proxy service of the "
           "same ferryd, both to the same backend's iperf3 server; `direct` goes straight to the "
           "backend. `up`: the client sends; `down` (-R): the server sends. Medians over the "
           "rounds. ferryd = ferryd's own CPU seconds per GiB; gateway = the machine's busy CPU "
           "seconds per GiB less the `direct` run's (same direction and round, scaled to the "
           "bytes moved): ferryd plus the softirq work of the gateway's interfaces.",
           "",
           "| direction | path | Gbit/s | ferryd CPU s/GiB | gateway CPU s/GiB | machine CPU s/GiB "
           "| runs (gateway CPU s/GiB) |",
           "|---|---|---:|---:|---:|---:|---|"]
    for (direction, path), runs in sorted(by.items()):
        med = [statistics.median(x[i] for x in runs) for i in range(4)]
        out.append(f"| {direction} | {path} | {med[0]:.2f} | {med[1]:.3f} | "
                   f"{'-' if path == 'direct' else f'{med[2]:.3f}'} | {med[3]:.3f} | "
                   f"{', '.join(f'{x[2]:.3f}' for x in runs) if path != 'direct' else '-'} |")
    for direction in ("up", "down"):
        d, pr = by.get((direction, "dsr")), by.get((direction, "proxy"))
        if d and pr:
            ratio = [statistics.median(x[i] for x in d) / statistics.median(x[i] for x in pr)
                     for i in (1, 2, 3)]
            out.append("")
            out.append(f"{direction}, DSR over the proxy per GiB: ferryd CPU {ratio[0]:.2f}x, "
                       f"gateway CPU {ratio[1]:.2f}x, the machine's CPU {ratio[2]:.2f}x.")
    text = "\n".join(out) + "\n"
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
