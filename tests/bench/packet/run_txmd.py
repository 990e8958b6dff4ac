#!/usr/bin/env python3
"""Runs txmd_eval (root): a veth pair between two private namespaces with default offloads; first
a correctness pass per mode (2,000 frames to a UDP socket on the peer: every one received, Udp
InCsumErrors 0), then COUNT frames per mode and size dropped at the peer's ingress hook (so only
the sending side is measured), five runs each, alternating. Writes tests/bench/results/txmd.txt.

    tests/bench/packet/run_txmd.py [BUILD_DIR]   (configured with -Dbench=true; default build-bench)"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build-bench")
EVAL = os.path.join(BUILD, "tests/bench/packet/txmd_eval")
OUT = os.path.join(ROOT, "tests/bench/results/txmd.txt")
COUNT = int(os.environ.get("COUNT", "1000000"))
TX, RX = f"txmd{os.getpid()}-tx", f"txmd{os.getpid()}-rx"
SRC, DST = "192.0.2.1", "192.0.2.2"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def in_ns(ns, *args, **kw):
    return sh("ip", "netns", "exec", ns, *args, **kw)


def csum_errors():
    snmp = in_ns(RX, "cat", "/proc/net/snmp").stdout.splitlines()
    head, vals = [l.split() for l in snmp if l.startswith("Udp:")][:2]
    return int(dict(zip(head, vals))["InCsumErrors"])


RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
s.bind((sys.argv[1], 9)); s.settimeout(1.0)
print("ready", flush=True)
n = 0
try:
    while True:
        s.recv(65535); n += 1
except socket.timeout:
    print(n)
"""


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    lines = []
    try:
        for ns in (TX, RX):
            sh("ip", "netns", "add", ns)
        sh("ip", "-n", TX, "link", "add", "t0", "type", "veth", "peer", "name", "r0", "netns", RX)
        sh("ip", "-n", TX, "link", "set", "t0", "address", "02:00:00:00:00:01", "up")
        sh("ip", "-n", RX, "link", "set", "r0", "address", "02:00:00:00:00:02", "up")
        sh("ip", "-n", RX, "addr", "add", f"{DST}/24", "dev", "r0")
        args = lambda mode, count, size: [EVAL, "t0", mode, str(count), str(size), "02:00:00:00:00:01",
                                          "02:00:00:00:00:02", SRC, DST]
        for mode in ("sw", "txmd"):  # correctness: the peer's stack accepts every checksum
            for size in (64, 1500):
                rx = subprocess.Popen(["ip", "netns", "exec", RX, "python3", "-c", RECEIVER, DST],
                                      stdout=subprocess.PIPE, text=True)
                assert rx.stdout.readline().strip() == "ready"
                before = csum_errors()
                in_ns(TX, *args(mode, 2000, size))
                got = int(rx.communicate(timeout=30)[0].strip())
                errors = csum_errors() - before
                lines.append(f"correctness {mode} {size} B: 2000 sent, {got} received by a UDP socket, "
                             f"{errors} Udp InCsumErrors")
                print(lines[-1], flush=True)
                if got != 2000 or errors:
                    raise SystemExit(f"{mode} {size} B: checksums not accepted")
        # Drop at the peer's ingress hook (before IP): only the sending side is measured.
        in_ns(RX, "nft", "add table netdev txmd { chain sink { type filter hook ingress device r0 "
              "priority 0; policy drop; }; }")
        figures = {}
        for run in range(5):
            for size in (64, 1500):
                for mode in ("sw", "txmd"):
                    out = in_ns(TX, "nice", "-n", "-15", *args(mode, COUNT, size)).stdout.strip()
                    total = float(out.rsplit("total ", 1)[1].split()[0])
                    figures.setdefault((size, mode), []).append(total)
        load = open("/proc/loadavg").read().split()[:3]
        lines.insert(0, f"# tests/bench/packet/run_txmd.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                        f"{os.uname().release}, load {' '.join(load)}; {COUNT:,} frames a run, 5 runs, "
                        "CPU (user + sys) of the sending process per frame, the peer drops at its ingress hook")
        for (size, mode), v in sorted(figures.items()):
            lines.append(f"{size} B {mode}: median {statistics.median(v):.0f} ns/frame "
                         f"(runs: {', '.join(f'{x:.0f}' for x in v)})")
    finally:
        for ns in (TX, RX):
            sh("ip", "netns", "del", ns, check=False)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


main()
