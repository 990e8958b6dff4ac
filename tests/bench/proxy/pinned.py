#!/usr/bin/env python3
"""One long-stream run with the proxy pinned to CPU 1 and iperf3 (client and server) to CPU 0, for
looking into one shape at a time (streams.sh runs them all, unpinned). Prints one line: Gbit/s,
the proxy's CPU, Gbit per proxy CPU second, the iperf3 server's CPU and sleeps, the proxy's
sleeps, and the whole machine's CPU (wall time x CPUs less idle time). Root; not part of make
test. Examples:

  pinned.py --ferryd build-bench/daemon/ferryd ferry up-P4
  pinned.py --ferryd ... --cc cubic --perf /tmp/f.data ferry up-P4      (perf record -g)
  pinned.py --ferryd ... --buffers '{"count": 16}' --env FERRY_URING_NO_STREAM_GROWTH=1 ferry up-P4
  pinned.py --ferryd ... --rate 3250M nginx up-P4                       (-b per stream)
  pinned.py --ferryd ... --perf-stat '-A -e timer:hrtimer_start' nginx up-P4

KIND is a proxies.py kind (ferry, nginx, haproxy, ferry-nogrowth, ...); SHAPE is up-P1, up-P4,
down-P1 or down-P4. --buffers and --proxy replace ferry's tcp.buffers and tcp.proxy sections.
--cc sets net.ipv4.tcp_congestion_control for the run and puts the one before back.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import proxies  # noqa: E402  (the proxies and /proc readings)
import streams  # noqa: E402  (the congestion control switch, awaiting the server idle)


def voluntary_switches(pids):
    """Voluntary context switches (each a sleep) of every thread of `pids`."""
    total = 0
    for pid in pids:
        for status in glob.glob(f"/proc/{pid}/task/*/status"):
            with open(status) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
    return total


def configured_kind(kind, buffers, proxy):
    """The bench kind, or a ferry kind whose config sections are replaced."""
    base = proxies.KINDS[kind]
    sections = {k: v for k, v in (("buffers", buffers), ("proxy", proxy)) if v is not None}
    if not sections:
        return base
    if not issubclass(base, proxies.Ferry):
        raise SystemExit(f"pinned.py: --buffers and --proxy configure ferry; {kind} is not ferry")
    return type("Configured", (base,), {"tcp_sections": {**base.tcp_sections, **sections}})


def run(a):
    pin_iperf = ["taskset", "-c", "0"]
    workdir = tempfile.mkdtemp(prefix="ferry-pinned-")
    os.chmod(workdir, 0o755)
    port = proxies.free_port()
    server = subprocess.Popen(pin_iperf + ["iperf3", "--server", "--bind", "127.0.0.1", "--port",
                                           str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kind = configured_kind(a.kind, a.buffers, a.proxy)
    proxy = kind(workdir, a.workers, port, 1024, 4096)
    try:
        proxy_port = proxy.start()
        streams.await_server_idle(port)  # start()'s probe reached the one-client server too
        pids = proxy.pids()
        for pid in pids:
            subprocess.run(["taskset", "-a", "-p", "-c", "1", str(pid)], capture_output=True)
        perf = stat = None
        if a.perf:
            perf = subprocess.Popen(["perf", "record", "-g", "-o", a.perf, "-p",
                                     ",".join(map(str, pids))],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if a.perf_stat:
            stat_out = os.path.join(workdir, "perf-stat.txt")
            stat = subprocess.Popen(["perf", "stat", "-a", "-x,", "-o", stat_out]
                                    + a.perf_stat.split(),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if perf or stat:
            time.sleep(0.5)
        streams_n = 4 if a.shape.endswith("P4") else 1
        cmd = pin_iperf + ["iperf3", "--client", "127.0.0.1", "--port", str(proxy_port),
                           "--parallel", str(streams_n), "--time", str(a.duration_s), "--json"]
        cmd += ["--reverse"] if a.shape.startswith("down") else []
        cmd += ["--bitrate", a.rate] if a.rate else []
        server_sleeps0, proxy_sleeps0 = voluntary_switches([server.pid]), voluntary_switches(pids)
        busy0, _, _ = proxies.machine_busy()
        server0, cpu0 = proxies.cpu_seconds([server.pid]), proxies.cpu_seconds(pids)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.duration_s + 60)
        server1, cpu1 = proxies.cpu_seconds([server.pid]), proxies.cpu_seconds(pids)
        busy1, _, _ = proxies.machine_busy()
        server_sleeps1, proxy_sleeps1 = voluntary_switches([server.pid]), voluntary_switches(pids)
        for p in (perf, stat):
            if p:
                p.send_signal(2)
                p.wait()
        if stat:
            with open(stat_out) as f:
                print(f.read().strip())
        received = json.loads(out.stdout)["end"]["sum_received"]
        gbit = received["bytes"] * 8 / 1e9
        cpu = cpu1 - cpu0
        machine = (busy1 - busy0) / proxies.CLK_TCK
        print(f"{a.kind} {a.shape} W={a.workers}: {gbit / received['seconds']:.2f} Gbit/s, "
              f"{gbit:.1f} Gbit, proxy {cpu:.2f} CPU s, {gbit / cpu:.2f} Gbit per CPU s, "
              f"server {server1 - server0:.2f} CPU s and {server_sleeps1 - server_sleeps0} "
              f"sleeps, proxy {proxy_sleeps1 - proxy_sleeps0} sleeps, machine {machine:.2f} CPU "
              f"s, {gbit / machine if machine > 0 else 0:.2f} Gbit per machine CPU s")
    finally:
        proxy.stop()
        server.terminate()
        server.wait(timeout=10)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("kind")
    p.add_argument("shape", choices=["up-P1", "up-P4", "down-P1", "down-P4"])
    p.add_argument("--ferryd", required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--duration-s", type=float, default=5.0)
    p.add_argument("--rate", help="iperf3 --bitrate per stream, e.g. 3250M")
    p.add_argument("--cc", default="", help="net.ipv4.tcp_congestion_control for the run")
    p.add_argument("--buffers", type=json.loads, help="ferry's tcp.buffers section (JSON)")
    p.add_argument("--proxy", type=json.loads, help="ferry's tcp.proxy section (JSON)")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for ferryd")
    p.add_argument("--perf", metavar="FILE", help="perf record -g of the proxy into FILE")
    p.add_argument("--perf-stat", metavar="ARGS", help="perf stat -a ARGS over the run")
    a = p.parse_args()
    proxies.use_builds(a.ferryd)
    for item in a.env:
        name, _, value = item.partition("=")
        os.environ[name] = value  # the proxies inherit this process's environment
    proxies.prioritize(-15)
    cc_before = streams.congestion_control()
    if a.cc and a.cc != cc_before:
        streams.set_congestion_control(a.cc)
    try:
        run(a)
    finally:
        if streams.congestion_control() != cc_before:
            streams.set_congestion_control(cc_before)


if __name__ == "__main__":
    main()
