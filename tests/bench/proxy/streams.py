#!/usr/bin/env python3
"""The TCP proxy benchmark's long streams (called by streams.sh): iperf3 through ferryd, HAProxy
and nginx stream to one iperf3 server on loopback, side by side in one run, each proxy with the
same worker count. The shapes are iperf3 -P 1 and -P 4 (parallel streams), each direction: `up`
(the client sends, as an upload or a backup does) and `down` (-R, the server sends, as a
download or a replication does). The figure is Gbit moved per proxy CPU second: every proxy uses
its whole CPU on loopback, so the rate alone would compare the machine, not the proxies.

Passes rotate the proxies' order; a second ferryd (--ferryd-b, shown as `ferry-b`) runs beside the
first for an A/B of two builds in the same run. --congestion-control sets the machine's TCP
congestion control for the run and puts the one before back at the end (it matters: BBR paces
with TCP's own timers on loopback, which has no qdisc); the report names the one used. Writes a
Markdown report (--out).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import proxies  # noqa: E402  (the proxies, /proc readings and the run's priority)
from harness import TestFailure, wait_until  # noqa: E402  (on the path proxies puts it on)

# (shape, parallel streams, reverse)
SHAPES = [("up-P1", 1, False), ("up-P4", 4, False), ("down-P1", 1, True), ("down-P4", 4, True)]


# /proc/net/tcp states of a connection the iperf3 server still holds open: ESTABLISHED,
# SYN_RECV, CLOSE_WAIT. (Orphans in FIN_WAIT, CLOSING or LAST_ACK it has already closed.)
HELD_STATES = ("01", "03", "08")


def server_connections(port):
    """The connections on local port `port` that the server still holds open."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state = fields[1], fields[3]
                if int(local.rsplit(":", 1)[1], 16) == port and state in HELD_STATES:
                    count += 1
    return count


def await_server_idle(port, timeout=10.0):
    """Waits until the iperf3 server has no connection left, so a new test is its only client."""
    try:
        wait_until(lambda: server_connections(port) == 0, timeout,
                   f"the iperf3 server on {port} to hold no connection", interval=0.01)
    except TestFailure as e:
        held = subprocess.run(["ss", "-tanp", f"( sport = :{port} or dport = :{port} )"],
                              capture_output=True, text=True).stdout
        raise RuntimeError(f"{e}:\n{held}") from e


def run_stream(a, port, streams, reverse, pids, server_pid):
    """One iperf3 client run through the proxy on `port`: Gbit received, the proxy's CPU, the
    iperf3 server's and the whole machine's."""
    cmd = ["iperf3", "--client", "127.0.0.1", "--port", str(port), "--parallel", str(streams),
           "--time", str(a.duration_s), "--json"] + (["--reverse"] if reverse else [])
    cpu0 = proxies.cpu_seconds(pids)
    server0 = proxies.cpu_seconds([server_pid])
    busy0, total0, _ = proxies.machine_busy()
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.duration_s + 60)
    seconds = time.monotonic() - t0
    busy1, total1, _ = proxies.machine_busy()
    cpu1 = proxies.cpu_seconds(pids)
    server1 = proxies.cpu_seconds([server_pid])
    result = json.loads(out.stdout)
    if out.returncode != 0 or "error" in result:
        raise RuntimeError(f"iperf3 failed: {result.get('error', out.stderr.strip())}")
    received = result["end"]["sum_received"]
    gbit = received["bytes"] * 8 / 1e9
    proxy_cpu = cpu1 - cpu0
    machine_cpu = (busy1 - busy0) / proxies.CLK_TCK
    return {"gbit": gbit, "gbps": gbit / received["seconds"], "proxy_cpu_s": proxy_cpu,
            "gbit_per_cpu_s": gbit / proxy_cpu if proxy_cpu else 0.0, "seconds": seconds,
            "machine_busy": (busy1 - busy0) / max(1, total1 - total0),
            "machine_cpu_s": machine_cpu, "server_cpu_s": server1 - server0,
            "gbit_per_machine_cpu_s": gbit / machine_cpu if machine_cpu > 0 else 0.0,
            "retransmits": result["end"].get("sum_sent", {}).get("retransmits", 0)}


CC_SYSCTL = "/proc/sys/net/ipv4/tcp_congestion_control"


def congestion_control():
    with open(CC_SYSCTL) as f:
        return f.read().strip()


def set_congestion_control(name):
    with open(CC_SYSCTL, "w") as f:
        f.write(name)


def report(a, results, raw):
    lines = ["# TCP proxy benchmark: long streams", ""]
    lines.append(f"`tests/bench/proxy/streams.sh`, {time.strftime('%Y-%m-%d %H:%M %Z')}: "
                 f"{proxies.machine()}; {a.duration_s:g} s per run, "
                 f"{a.repeat} passes (the proxies' order rotated each pass), nice {a.nice}, TCP "
                 f"congestion control {a.cc_used}.")
    lines.append("")
    lines.append("iperf3 (Debian 3.12) client -> proxy -> iperf3 server, all on loopback; `up`: "
                 "the client sends, `down` (`-R`): the server sends; `P1`/`P4`: one or four "
                 "parallel streams. Gbit per proxy CPU second = Gbit the receiver got / "
                 "(utime + stime of the proxy's processes over the run); medians over the passes "
                 "(every pass in brackets). Each proxy has the same worker count W (ferry "
                 "`tcp.workers`, HAProxy `nbthread`, nginx `worker_processes`).")
    lines.append("")
    lines.append("On loopback the context that transmits a segment also runs the receiving "
                 "socket's TCP input and wakes its reader, so a proxy is charged for part of the "
                 "iperf3 server's receive work when it transmits its own segments, and not when "
                 "the segments leave later from a pacing timer or an ACK on the server's CPU. "
                 "The machine columns count everyone: machine CPU s = wall time x CPUs less "
                 "idle time over the run (client, proxy, server, softirq), and Gbit per machine "
                 "CPU second is the Gbit over that; server CPU s is the iperf3 server's.")
    if a.ferryd_b:
        lines.append("")
        lines.append(f"`ferry` is {a.ferryd}, `ferry-b` is {a.ferryd_b}.")
    for w in a.workers:
        lines += ["", f"## W = {w}", ""]
        peers = [p for p in a.proxies if p not in ("ferry", "direct")]
        compare = "ferry" in a.proxies and peers
        head = "| shape | proxy | Gbit/s | proxy CPU s | Gbit per CPU s | passes |"
        head += " ferry / this |" if compare else ""
        head += " server CPU s | machine CPU s | Gbit per machine CPU s |"
        head += " ferry / this, machine |" if compare else ""
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
        for shape, _, _ in SHAPES:
            if shape not in a.shapes:
                continue
            ferry = results[w].get(("ferry", shape))
            for name in a.proxies:
                r = results[w].get((name, shape))
                if not r:
                    continue
                def median(key, runs=r):
                    return statistics.median(x[key] for x in runs) if runs else 0

                def ferry_over(key):
                    """ferry's median over this proxy's, or blank (ferry's own row, no figure)."""
                    mine = median(key)
                    if not compare:
                        return ""
                    if name == "ferry" or not mine:
                        return " |"
                    return f" {median(key, ferry) / mine:.2f} |"

                passes = " / ".join(f"{x['gbit_per_cpu_s']:.2f}" for x in r)
                row = (f"| {shape} | {name} | {median('gbps'):.2f} | {median('proxy_cpu_s'):.2f} | "
                       f"{median('gbit_per_cpu_s'):.2f} | {passes} |")
                row += ferry_over("gbit_per_cpu_s")
                row += (f" {median('server_cpu_s'):.2f} | {median('machine_cpu_s'):.2f} |"
                        f" {median('gbit_per_machine_cpu_s'):.2f} |")
                row += ferry_over("gbit_per_machine_cpu_s")
                lines.append(row)
    lines += ["", "<details><summary>every run</summary>", "", "```"] + raw + ["```", "</details>"]
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[: -len(raw) - 5]))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ferryd", required=True)
    p.add_argument("--ferryd-b", help="a second ferryd to run beside the first (an A/B)")
    p.add_argument("--out", required=True)
    p.add_argument("--proxies", default="ferry haproxy nginx")
    p.add_argument("--workers", default="1 2")
    p.add_argument("--shapes", default=" ".join(s for s, _, _ in SHAPES))
    p.add_argument("--duration-s", type=float, default=5.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--nice", type=int, default=-15)
    p.add_argument("--congestion-control", default="",
                   help="net.ipv4.tcp_congestion_control for the run (default: as it is)")
    a = p.parse_args()
    if a.nice:
        proxies.prioritize(a.nice)
    a.proxies = a.proxies.split() + (["ferry-b"] if a.ferryd_b else [])
    a.workers = [int(w) for w in a.workers.split()]
    a.shapes = a.shapes.split()
    proxies.use_builds(a.ferryd, a.ferryd_b)
    cc_before = congestion_control()
    if a.congestion_control and a.congestion_control != cc_before:
        set_congestion_control(a.congestion_control)
    a.cc_used = congestion_control()
    workdir = tempfile.mkdtemp(prefix="ferry-streams-bench-")
    os.chmod(workdir, 0o755)
    server_port = proxies.free_port()
    server = subprocess.Popen(["iperf3", "--server", "--bind", "127.0.0.1", "--port",
                               str(server_port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    results = {w: {} for w in a.workers}
    raw = []
    failed = True
    try:
        for rep in range(a.repeat):
            for w in a.workers:
                order = a.proxies[rep % len(a.proxies):] + a.proxies[:rep % len(a.proxies)]
                for name in order:
                    proxy = proxies.KINDS[name](workdir, w, server_port, 1024, 4096)
                    try:
                        port = proxy.start()
                        # start() made a connection to see the proxy listen, and the proxy
                        # passed it on to the iperf3 server, which takes one client at a time.
                        await_server_idle(server_port)
                        for shape, streams, reverse in SHAPES:
                            if shape not in a.shapes:
                                continue
                            r = run_stream(a, port, streams, reverse, proxy.pids(),
                                           server.pid)
                            results[w].setdefault((name, shape), []).append(r)
                            text = (f"pass {rep + 1} W={w} {name:<8} {shape:<8} "
                                    f"{r['gbps']:6.2f} Gbit/s  proxy {r['proxy_cpu_s']:5.2f} s  "
                                    f"{r['gbit_per_cpu_s']:6.2f} Gbit/CPU-s  "
                                    f"server {r['server_cpu_s']:5.2f} s  machine "
                                    f"{r['machine_cpu_s']:5.2f} s  "
                                    f"{r['gbit_per_machine_cpu_s']:6.2f} Gbit/machine-CPU-s  "
                                    f"retransmits {r['retransmits']}")
                            raw.append(text)
                            print("  " + text, flush=True)
                    finally:
                        proxy.stop()
        failed = False
    finally:
        server.terminate()
        server.wait(timeout=10)
        if failed:
            print(f"streams.py: a run failed; the proxies' configs and logs stay in {workdir}",
                  file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        if congestion_control() != cc_before:
            set_congestion_control(cc_before)
    report(a, results, raw)


if __name__ == "__main__":
    main()
