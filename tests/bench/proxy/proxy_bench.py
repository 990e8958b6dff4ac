#!/usr/bin/env python3
"""Drives the TCP proxy benchmark (called by run.sh): ferryd, HAProxy and nginx stream between the
same proxy-load client and the same proxy-backend, each proxy with the same worker count, side by
side in one run. Writes a Markdown report (tests/bench/results/proxy.md by default).

Per worker count W and pass, every proxy gets a fresh instance and serves, in order:
  64 KiB responses at 64 and at 256 connections, 64 B request/response at 256 connections;
after the passes, a fresh instance of each holds N idle proxied connections for the RSS/PSS figures.
The proxy's CPU time is utime+stime of all its processes (/proc/PID/stat), before and after each
load; its memory is VmRSS (/proc/PID/status) and Pss (/proc/PID/smaps_rollup) summed the same way.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
import work_split  # noqa: E402  (--profile's split of the samples by kind of work)

from proxies import (  # noqa: E402  (the proxies and the /proc readings)
    CLK_TCK, GIB, KINDS, cpu_seconds, ksoftirqd_pids, machine, machine_busy,
    memory_kib, open_fds, prioritize, reported_port, use_builds)


# ---------------------------------------------------------------------------------------------
# Loads


def run_load(a, port, connections, request_bytes, response_bytes, pids, backend_pid):
    """One proxy-load rr run; returns its JSON result plus the CPU seconds of the proxy, the load
    tool, the backend, and everything else on the machine over the run."""
    cmd = [os.path.join(a.bin, "proxy-load"), "rr", "--port", str(port),
           "--connections", str(connections), "--request-bytes", str(request_bytes),
           "--response-bytes", str(response_bytes), "--duration-s", str(a.duration_s),
           "--threads", str(a.load_threads), "--json"]
    cpu0 = cpu_seconds(pids)
    backend0 = cpu_seconds([backend_pid])
    load0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, total0, softirq0 = machine_busy()
    ksoftirqd = ksoftirqd_pids()
    ksoftirqd0 = cpu_seconds(ksoftirqd)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.duration_s + 120)
    busy1, total1, softirq1 = machine_busy()
    ksoftirqd1 = cpu_seconds(ksoftirqd)
    load1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1 = cpu_seconds(pids)
    backend1 = cpu_seconds([backend_pid])
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["proxy_cpu_s"] = cpu1 - cpu0
    r["load_cpu_s"] = (load1.ru_utime + load1.ru_stime) - (load0.ru_utime + load0.ru_stime)
    r["machine_busy"] = (busy1 - busy0) / max(1, total1 - total0)
    r["machine_cpu_s"] = (busy1 - busy0) / CLK_TCK
    r["backend_cpu_s"] = backend1 - backend0
    # Loopback receive processing that ran as softirq outside any of our processes' syscalls:
    # charged to no one (/proc/stat softirq) or to ksoftirqd. It is shared by all three parties.
    r["softirq_cpu_s"] = (softirq1 - softirq0) / CLK_TCK + (ksoftirqd1 - ksoftirqd0)
    r["others_cpu_s"] = max(0.0, r["machine_cpu_s"] - r["proxy_cpu_s"] - r["load_cpu_s"] -
                            r["backend_cpu_s"] - r["softirq_cpu_s"])
    proxied = r["requests"] * (request_bytes + response_bytes)
    r["proxied_gib"] = proxied / GIB
    r["cpu_s_per_gib"] = r["proxy_cpu_s"] / r["proxied_gib"] if r["proxied_gib"] else 0
    r["cpu_us_per_request"] = r["proxy_cpu_s"] * 1e6 / max(1, r["requests"])
    return r


def run_idle(a, proxy):
    """N idle proxied connections on a fresh instance: memory before and while they are held."""
    pids = proxy.pids()
    time.sleep(0.5)
    rss0, pss0 = memory_kib(pids)
    fds0 = open_fds(pids)
    cmd = [os.path.join(a.bin, "proxy-load"), "idle", "--port", str(proxy.port),
           "--connections", str(a.idle_connections), "--json"]
    load = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        held = json.loads(load.stdout.readline())
        time.sleep(1.0)  # let the workers finish whatever the last batch left them
        pids = proxy.pids()
        rss1, pss1 = memory_kib(pids)
        fds1 = open_fds(pids)
    finally:
        load.stdin.close()
        load.wait(timeout=60)
    n = max(1, held["held"])
    return {"held": held["held"], "open_seconds": held["seconds"], "failures": held["failures"],
            "rss_before_kib": rss0, "rss_after_kib": rss1, "pss_before_kib": pss0,
            "pss_after_kib": pss1, "fds_before": fds0, "fds_after": fds1,
            "rss_bytes_per_conn": (rss1 - rss0) * 1024 / n,
            "pss_bytes_per_conn": (pss1 - pss0) * 1024 / n}


SHAPES = [("64k@64", 64, 65536), ("64k@256", 256, 65536), ("64b@256", 256, 64)]


def median(runs, key):
    return sorted(runs, key=key)[len(runs) // 2]


def versions(a):
    out = []
    for cmd in (["haproxy", "-v"], ["nginx", "-v"]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        out.append((p.stdout + p.stderr).splitlines()[0])
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                            "--", "lib", "daemon", "bpf"], capture_output=True,
                           text=True).stdout.split("\n")
    dirty = [line[3:] for line in dirty if line.strip()]
    built = time.strftime("%H:%M UTC", time.gmtime(os.path.getmtime(a.ferryd))) \
        if os.path.exists(a.ferryd) else "?"
    out.append(f"ferryd from {os.path.relpath(a.ferryd, ROOT)} built {built} from the shared tree "
               f"at ferry {rev}" + (f", with uncommitted changes in {', '.join(dirty)}" if dirty
                                    else " (no uncommitted changes under lib/, daemon/, bpf/)"))
    return out


# ---------------------------------------------------------------------------------------------
# The report


def ratio(x, y):
    return f"{x / y:.2f}x" if x and y else "n/a"


def gib_per_cpu_s(r):
    return r["proxied_gib"] / r["proxy_cpu_s"] if r["proxy_cpu_s"] else 0


def representative(runs, shape):
    """The median pass: by GiB per proxy CPU second for 64 KiB (by Gbps without a proxy), by
    requests/s for 64 B."""
    if shape.startswith("64k") and not any(r["proxy_cpu_s"] for r in runs):
        return median(runs, key=lambda x: x["gbps"])
    if shape.startswith("64k"):
        return median(runs, key=gib_per_cpu_s)
    return median(runs, key=lambda x: x["requests_per_s"])


def worker_section(a, w, per, idle_w):
    lines = [f"## W = {w}", ""]
    has = lambda shape: any(per.get((name, shape)) for name in a.proxies)
    if has("64k@64") or has("64k@256"):
        lines += ["### 64 KiB responses (64 B requests)", "",
                  "| proxy | conns | Gbps | requests/s | p99 ms | proxy CPU s | CPU s per GiB "
                  "| GiB per CPU s | softirq s | others' CPU s |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for shape, conns, _ in SHAPES[:2]:
        for name in a.proxies:
            if not per.get((name, shape)):
                continue
            r = representative(per[(name, shape)], shape)
            cost = ("| - | - | -" if name == "direct" else
                    f"| {r['proxy_cpu_s']:.2f} | {r['cpu_s_per_gib']:.3f} | {gib_per_cpu_s(r):.2f}")
            lines.append(f"| {name} | {conns} | {r['gbps']:.2f} | {r['requests_per_s']:.0f} | "
                         f"{r['p99_us'] / 1000:.2f} {cost} | {r['softirq_cpu_s']:.2f} "
                         f"| {r['others_cpu_s']:.2f} |")
    if has("64b@256"):
        lines += ["", "### 64 B request/response, 256 connections", "",
                  "| proxy | requests/s | p50 us | p99 us | proxy CPU us per request "
                  "| softirq s | others' CPU s |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
    for name in a.proxies:
        if not per.get((name, "64b@256")):
            continue
        r = representative(per[(name, "64b@256")], "64b@256")
        cost = "-" if name == "direct" else f"{r['cpu_us_per_request']:.2f}"
        lines.append(f"| {name} | {r['requests_per_s']:.0f} | {r['p50_us']:.0f} | "
                     f"{r['p99_us']:.0f} | {cost} | {r['softirq_cpu_s']:.2f} | "
                     f"{r['others_cpu_s']:.2f} |")
    if idle_w:
        lines += ["", f"### {a.idle_connections} idle proxied connections", "",
                  "Each connection made one 64 B round trip through the proxy (so the proxy holds "
                  "the client side and the backend side) and then stays open; memory is summed "
                  "over the proxy's processes, before the connections were opened and while they "
                  "are held.", "",
                  "| proxy | held | opened in s | RSS before MiB | RSS held MiB "
                  "| RSS bytes per conn | PSS bytes per conn | fds held |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name in a.proxies:
            r = idle_w.get(name)
            if r:
                lines.append(f"| {name} | {r['held']} | {r['open_seconds']:.1f} | "
                             f"{r['rss_before_kib'] / 1024:.1f} | "
                             f"{r['rss_after_kib'] / 1024:.1f} | {r['rss_bytes_per_conn']:.0f} | "
                             f"{r['pss_bytes_per_conn']:.0f} | {r['fds_after'] - r['fds_before']} |")
    peers = [p for p in a.proxies if p not in ("ferry", "direct")]
    if not any(name == "ferry" for name, _ in per) or not peers:
        return lines + [""]
    lines += ["", "### ferry against each peer", "",
              "Targets: >= 1.3x on 64 KiB GiB per CPU second; <= 4096 RSS bytes per idle "
              "connection (absolute, in the table above).", ""]
    lines += against(per, "ferry", peers, idle_w)
    floors = [p for p in peers if p.startswith("floor-")]
    others = [p for p in peers if not p.startswith("floor-") and p != "ferry-b"]
    for floor in floors:
        if others:
            lines += ["", f"### {floor} against each peer", "",
                      "What a forwarder with no work of its own reaches against the peers, in its "
                      "way of moving the bytes (a proxy that moves them better can get further).",
                      ""]
            lines += against(per, floor, others, {})
    return lines + [""]


def against(per, subject, peers, idle_w):
    """The table of subject's figures over each peer's, per shape."""
    lines = ["| figure | " + " | ".join(f"{subject}/{p}" for p in peers) + " |",
             "|---|" + "---:|" * len(peers)]

    def row(label, shape, key):
        f = key(representative(per[(subject, shape)], shape)) if per.get((subject, shape)) else 0
        cells = []
        for p in peers:
            v = key(representative(per[(p, shape)], shape)) if per.get((p, shape)) else 0
            cells.append(ratio(f, v))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    for shape in ("64k@64", "64k@256"):
        if per.get((subject, shape)):
            row(f"{shape} GiB per CPU second", shape, gib_per_cpu_s)
            row(f"{shape} Gbps", shape, lambda r: r["gbps"])
    if per.get((subject, "64b@256")):
        row("64b@256 requests/s", "64b@256", lambda r: r["requests_per_s"])
        row("64b@256 CPU per request (lower is better)", "64b@256",
            lambda r: r["cpu_us_per_request"])
        row("64b@256 p99 (lower is better)", "64b@256", lambda r: r["p99_us"])
    if idle_w.get(subject):
        f = idle_w[subject]["rss_bytes_per_conn"]
        lines.append("| idle RSS per connection (lower is better) | " + " | ".join(
            ratio(f, idle_w.get(p, {}).get("rss_bytes_per_conn")) for p in peers) + " |")
    return lines


def summary(a, results, idle):
    """One row per worker count and proxy: the figures the targets are about."""
    lines = ["| W | proxy | 64 KiB x64 Gbps | GiB per CPU s | 64 KiB x256 Gbps | GiB per CPU s "
             "| 64 B x256 req/s | p99 ms | idle RSS B/conn |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for w in a.workers:
        for name in a.proxies:
            cells = []
            for shape in ("64k@64", "64k@256"):
                runs = results[w].get((name, shape))
                if runs:
                    r = representative(runs, shape)
                    cells += [f"{r['gbps']:.2f}", f"{gib_per_cpu_s(r):.2f}" if r["proxy_cpu_s"] else "-"]
                else:
                    cells += ["", ""]
            runs = results[w].get((name, "64b@256"))
            if runs:
                r = representative(runs, "64b@256")
                cells += [f"{r['requests_per_s']:.0f}", f"{r['p99_us'] / 1000:.1f}"]
            else:
                cells += ["", ""]
            i = idle.get(w, {}).get(name)
            cells.append(f"{i['rss_bytes_per_conn']:.0f}" if i else "-")
            if any(cells[:-1]) or i:
                lines.append(f"| {w} | {name} | " + " | ".join(cells) + " |")
    return lines


def report(a, results, idle, unavailable, raw_lines):
    lines = [
        "# TCP proxy benchmark",
        "",
        f"`tests/bench/proxy/run.sh`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{machine()}.",
        "",
        "* " + "\n* ".join(a.version_lines),
        f"* One proxy-backend thread and {a.load_threads} proxy-load thread(s) on the same two "
        "cores as the proxy, all over loopback (127.0.0.1), all in one scheduler autogroup at "
        f"nice {a.nice} (both the group's and the processes' own). Each proxy gets the same worker count W (ferry `tcp.workers`, HAProxy "
        "`nbthread`, nginx `worker_processes`) and a fresh instance per pass; configs: "
        "`tests/bench/proxy/{ferryd.json,haproxy.cfg,nginx.conf}.in`.",
        f"* Each load runs {a.duration_s:g} s with one request in flight per connection; a row "
        f"is the median of {a.repeat} passes (by GiB per proxy CPU second for 64 KiB, by "
        "requests/s for 64 B); the passes are interleaved over all proxies so load from other "
        "processes on this shared machine spreads over every row. `direct` is proxy-load "
        "against proxy-backend with no proxy between them.",
        "* **Proxy CPU** is utime+stime of all the proxy's processes (/proc/PID/stat) over the "
        "load; loopback TCP work done in the proxy's syscalls (including the receive path that "
        "the sender's softirq runs) counts as the proxy's. **GiB proxied** counts request and "
        "response bytes of completed requests. **softirq s** is loopback receive work that ran "
        "outside every process's syscalls (the softirq column of /proc/stat plus ksoftirqd "
        "threads): charged to no one, shared by client, proxy and backend. **others' CPU s** is "
        "what the rest of this shared machine used during the load (busy time from /proc/stat "
        f"minus all of the above), out of {2 * a.duration_s:g} CPU seconds. The client, the backend and the "
        "proxy share two cores, so requests/s and Gbps are bounded by those cores and compare "
        "the proxies' cost more than their ceiling; CPU per GiB is the figure to compare.",
        "",
    ]
    for name, why in unavailable.items():
        lines += [f"**{name} not measured:** {why}", ""]
    lines += ["## Summary", ""] + summary(a, results, idle) + [""]
    for w in a.workers:
        lines += worker_section(a, w, results[w], idle.get(w, {}))
    lines += ["## Every pass", "", "```"] + raw_lines + ["```", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[: lines.index("## Every pass")]))
    print(f"written to {a.out}")


def profile(a, shapes, workdir, backend, backend_port, maxconn, nofile):
    """Where each proxy's CPU time goes, per load shape: perf samples of its processes only."""
    os.makedirs(a.profile, exist_ok=True)
    for w in a.workers:
        for name in a.proxies:
            if name == "direct":
                continue
            for shape, conns, resp in shapes:
                proxy = KINDS[name](workdir, w, backend_port, maxconn, nofile)
                try:
                    port = proxy.start()
                    base = os.path.join(a.profile, f"{name}-w{w}-{shape}")
                    perf = subprocess.Popen(
                        ["perf", "record", "-q", "-F", "1999", "-o", base + ".data", "-p",
                         ",".join(str(p) for p in proxy.pids())],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)
                    r = run_load(a, port, conns, 64, resp, proxy.pids(), backend.pid)
                    perf.send_signal(signal.SIGINT)
                    perf.wait(timeout=60)
                finally:
                    proxy.stop()
                with open(base + ".txt", "w") as f:
                    f.write(f"# {name} W={w} {shape}: {r['gbps']:.2f} Gbps, "
                            f"{r['requests_per_s']:.0f} req/s, proxy {r['proxy_cpu_s']:.2f} CPU s, "
                            f"{r['cpu_s_per_gib']:.3f} s/GiB\n")
                    split = work_split.split(base + ".data")
                    f.write("# by kind of work: " + ", ".join(
                        f"{kind} {percent:.1f}%" for kind, percent in split.items()) + "\n")
                    f.flush()
                    for sort in ("comm,dso", "comm,dso,symbol"):  # per thread, then per symbol
                        subprocess.run(["perf", "report", "-i", base + ".data", "--stdio",
                                        "--no-children", "--percent-limit", "0.5",
                                        "--sort", sort], stdout=f, stderr=subprocess.DEVNULL)
                        f.flush()
                os.unlink(base + ".data")
                print(f"  {base}.txt: {r['gbps']:.2f} Gbps, {r['cpu_s_per_gib']:.3f} s/GiB",
                      flush=True)


# ---------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bin", required=True, help="directory of proxy-load and proxy-backend")
    p.add_argument("--ferryd", required=True)
    p.add_argument("--ferryd-b", help="a second ferryd to run beside the first (`ferry-b`, an A/B)")
    p.add_argument("--out", required=True)
    p.add_argument("--proxies", default="direct ferry haproxy haproxy-splice nginx")
    p.add_argument("--workers", default="2 1")
    p.add_argument("--duration-s", type=float, default=3.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--load-threads", type=int, default=1)
    p.add_argument("--backend-threads", type=int, default=1)
    p.add_argument("--idle-connections", type=int, default=9900)
    p.add_argument("--idle-workers", default="2",
                   help="worker counts the idle test runs at (opening 9,900 connections through "
                        "a proxy that is slow to start them takes minutes)")
    p.add_argument("--shapes", default=" ".join(s for s, _, _ in SHAPES))
    p.add_argument("--profile", metavar="DIR",
                   help="instead of the benchmark: one load per proxy, worker count and shape "
                        "under `perf record` of the proxy's processes; writes DIR/NAME-wW-SHAPE.txt "
                        "(the split by kind of work, work_split.py, then a flat profile by object and "
                        "symbol, user and kernel)")
    p.add_argument("--nice", type=int, default=-15,
                   help="nice value of this run's own scheduler autogroup and of its processes "
                        "(the same for every proxy), so other work on a shared machine cannot "
                        "starve the run; 0 leaves both alone")
    a = p.parse_args()
    if a.nice:
        prioritize(a.nice)
    a.proxies = a.proxies.split() + (["ferry-b"] if a.ferryd_b else [])
    a.workers = [int(w) for w in a.workers.split()]
    shapes = [s for s in SHAPES if s[0] in a.shapes.split()]
    use_builds(a.ferryd, a.ferryd_b)
    a.version_lines = versions(a)  # the tree as it is when the run starts
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    maxconn = max(a.idle_connections, 1024) + 16  # HAProxy's cap; the loads need 256

    workdir = tempfile.mkdtemp(prefix="ferry-proxy-bench-")
    os.chmod(workdir, 0o755)
    backend = subprocess.Popen([os.path.join(a.bin, "proxy-backend"), "--threads",
                                str(a.backend_threads)], stdout=subprocess.PIPE, text=True)
    results = {w: {} for w in a.workers}
    idle = {w: {} for w in a.workers + [int(x) for x in a.idle_workers.split()]}
    unavailable = {}
    raw = []
    try:
        backend_port = reported_port(backend, "proxy-backend")
        if a.profile:
            profile(a, shapes, workdir, backend, backend_port, maxconn, nofile)
            return
        for rep in range(a.repeat):
            for w in a.workers:
                # Rotate the order per pass so no proxy always runs first or last.
                order = a.proxies[rep % len(a.proxies):] + a.proxies[:rep % len(a.proxies)]
                for name in order:
                    if name in unavailable:
                        continue
                    proxy = KINDS[name](workdir, w, backend_port, maxconn, nofile)
                    try:
                        port = proxy.start()
                    except (RuntimeError, OSError) as e:
                        unavailable[name] = str(e).strip().replace("\n", " ")[:600]
                        print(f"  {name}: not available: {unavailable[name]}", flush=True)
                        proxy.stop()
                        continue
                    try:
                        for shape, conns, resp in shapes:
                            r = run_load(a, port, conns, 64, resp, proxy.pids(), backend.pid)
                            results[w].setdefault((name, shape), []).append(r)
                            text = (f"pass {rep + 1} W={w} {name:<8} {shape:<8} "
                                    f"{r['gbps']:6.2f} Gbps {r['requests_per_s']:8.0f} req/s "
                                    f"p99 {r['p99_us']:8.0f} us  proxy {r['proxy_cpu_s']:5.2f} s "
                                    f"({r['cpu_s_per_gib']:.3f} s/GiB)  load "
                                    f"{r['load_cpu_s']:4.2f} s  backend {r['backend_cpu_s']:4.2f} s  "
                                    f"softirq {r['softirq_cpu_s']:4.2f} s  "
                                    f"others {r['others_cpu_s']:4.2f} s  "
                                    f"busy {r['machine_busy']:.0%}"
                                    f"{'  FAILURES ' + str(r['failures']) if r['failures'] else ''}")
                            raw.append(text)
                            print("  " + text, flush=True)
                    finally:
                        proxy.stop()
        if a.idle_connections:
            for w in [int(x) for x in a.idle_workers.split()]:
                for name in a.proxies:
                    if name in unavailable or name == "direct" or not KINDS[name].idle_test:
                        continue
                    proxy = KINDS[name](workdir, w, backend_port, maxconn, nofile)
                    try:
                        proxy.start()
                        r = run_idle(a, proxy)
                    except (RuntimeError, OSError, ValueError) as e:
                        print(f"  idle W={w} {name}: failed: {e}", flush=True)
                        continue
                    finally:
                        proxy.stop()
                    idle[w][name] = r
                    text = (f"idle W={w} {name:<8} held {r['held']} in {r['open_seconds']:.1f} s  "
                            f"RSS {r['rss_before_kib']} -> {r['rss_after_kib']} KiB "
                            f"({r['rss_bytes_per_conn']:.0f} B/conn)  PSS {r['pss_before_kib']} -> "
                            f"{r['pss_after_kib']} KiB ({r['pss_bytes_per_conn']:.0f} B/conn)  "
                            f"fds {r['fds_before']} -> {r['fds_after']}"
                            f"{'  FAILURES ' + str(r['failures']) if r['failures'] else ''}")
                    raw.append(text)
                    print("  " + text, flush=True)
    finally:
        backend.terminate()
        backend.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
    if not a.profile:
        report(a, results, idle, unavailable, raw)


if __name__ == "__main__":
    main()
