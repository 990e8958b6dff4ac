#!/usr/bin/env python3
"""Drives the echo and large-response benchmarks (called by run.sh and run_large.sh).

echo:  echo-load against echo-host (a TcpPlane) for every io_ready mode and worker count, and
       against epoll-echo (single-threaded epoll) as the kernel-bound reference, in one run; the
       scheduler counters are read from the host before and after each load and divided by the
       round trips. Writes a Markdown table.
large: large-recv (the runtime receiving) against epoll-echo --response-bytes, with and without
       bundles, ring credit and streaming, at several connection counts. Writes a Markdown table.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time


def start(cmd, env=None):
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                            env=env)
    line = proc.stdout.readline().strip()
    if not line.startswith("port "):
        proc.kill()
        raise SystemExit(f"{cmd[0]}: expected 'port N', got {line!r}")
    return proc, int(line.split()[1])


def counters(host):
    host.stdin.write("counters\n")
    host.stdin.flush()
    return json.loads(host.stdout.readline())


def stop(proc):
    try:
        if proc.stdin:
            proc.stdin.write("quit\n")
            proc.stdin.flush()
    except BrokenPipeError:
        pass
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def load(bin_dir, port, a):
    out = subprocess.run([os.path.join(bin_dir, "echo-load"), "--port", str(port),
                          "--connections", str(a.connections), "--rounds", str(a.rounds),
                          "--size", str(a.size), "--threads", str(a.load_threads), "--json"],
                         check=False, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr + out.stdout)
    return json.loads(out.stdout.strip().splitlines()[-1])


SUM_KEYS = ["tasks_run", "deque_steals", "inbox_steals", "victim_inbox_attempts", "index_pops",
            "index_stale_pops", "parks", "wakes", "global_queue_pops", "home_requests"]


def delta(before, after):
    total = {k: 0 for k in SUM_KEYS}
    for b, a in zip(before, after):
        for k in SUM_KEYS:
            total[k] += a[k] - b[k]
    return total


def median(runs, key=lambda r: r["rt_per_s"]):
    """The run with the median throughput (the machine is shared: single runs are noisy)."""
    return sorted(runs, key=key)[len(runs) // 2]


def machine():
    cpus = os.cpu_count()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpus} CPUs ({model}), kernel {platform.release()}"


def echo(a):
    print(f"echo: {a.connections} connections x {a.rounds} rounds, {a.size}-byte messages", flush=True)
    # Every configuration once per pass, passes repeated: load from other processes on a shared
    # machine then spreads over all rows instead of skewing whichever ran during a busy minute.
    configs = [("epoll (reference)", 1, None, None)]
    for spec in a.modes:
        # "index@N": io_ready=index with FERRY_TASK_INDEX_DRAIN=N (the batch drain measured).
        mode, _, drain = spec.partition("@")
        env = dict(os.environ)
        label = "base" if mode == "inbox" else mode
        if drain:
            env["FERRY_TASK_INDEX_DRAIN"] = drain
            label = f"{mode} (drain {drain})"
        elif mode == "index":
            label = f"index (drain {env.get('FERRY_TASK_INDEX_DRAIN', '4')})"
        for w in a.workers:
            configs.append((label, w, mode, env))
    results = {i: [] for i in range(len(configs))}
    for rep in range(a.repeat):
        for i, (label, w, mode, env) in enumerate(configs):
            if mode is None:
                proc, port = start([os.path.join(a.bin, "epoll-echo")])
                try:
                    results[i].append((load(a.bin, port, a), None))
                finally:
                    stop(proc)
            else:
                cmd = [os.path.join(a.bin, "echo-host"), "--workers", str(w), "--io-ready", mode]
                proc, port = start(cmd, env)
                try:
                    proc.stdout.readline()  # status line
                    before = counters(proc)
                    r = load(a.bin, port, a)
                    results[i].append((r, delta(before, counters(proc))))
                finally:
                    stop(proc)
            r, d = results[i][-1]
            extra = "" if d is None else (
                f"  victim/rt {d['victim_inbox_attempts'] / max(1, r['round_trips']):.3f}"
                f"  parks/rt {d['parks'] / max(1, r['round_trips']):.3f}")
            print(f"  pass {rep + 1}: {label:<17} W={w}  {r['rt_per_s']:>9.0f} rt/s  "
                  f"p99 {r['p99_us']:.0f} us{extra}", flush=True)
    rows = []
    for i, (label, w, mode, env) in enumerate(configs):
        r, d = median(results[i], key=lambda x: x[0]["rt_per_s"])
        rows.append((label, w, r, d))
    lines = [
        "# Echo benchmark",
        "",
        f"`tests/bench/echo/run.sh`, {time.strftime('%Y-%m-%d')}, {machine()}.",
        f"{a.connections} connections x {a.rounds} rounds of {a.size}-byte request/response over "
        f"loopback; echo-load with {a.load_threads} client thread(s) on the same machine; each "
        f"row is the median by rt/s of {a.repeat} passes over all rows (interleaved, so load "
        "from other processes on this shared machine spreads over every row). "
        "`base` is io_ready=inbox (the default); `index (drain N)` takes up to N tasks per index "
        "pop (FERRY_TASK_INDEX_DRAIN, default 4). A *round* is one round trip; counters are "
        "summed over the workers and divided by the round trips.",
    ]
    if (os.cpu_count() or 0) < max(a.workers) + 1:
        lines.append(f"**Caveat:** {os.cpu_count()} CPUs shared by the client, the server's "
                     "workers and everything else: W > 2 oversubscribes the machine, so those rows "
                     "measure scheduling under oversubscription, not scaling.")
    lines += ["",
              "| mode | W | rt/s | p50 (us) | p95 (us) | p99 (us) | victim attempts/round | parks/round |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, w, r, d in rows:
        rts = max(1, r["round_trips"])
        victim = "—" if d is None else f"{d['victim_inbox_attempts'] / rts:.3f}"
        parks = "—" if d is None else f"{d['parks'] / rts:.3f}"
        fail = " (failures!)" if r.get("failures") else ""
        lines.append(f"| {mode} | {w} | {r['rt_per_s']:.0f}{fail} | {r['p50_us']:.0f} | "
                     f"{r['p95_us']:.0f} | {r['p99_us']:.0f} | {victim} | {parks} |")
    lines += ["", "Further scheduler counters per round:", "",
              "| mode | W | tasks run | deque steals | inbox steals | index pops | stale pops | "
              "wakes | global pops | home requests |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, w, r, d in rows:
        if d is None:
            continue
        rts = max(1, r["round_trips"])
        lines.append("| {} | {} | {} |".format(mode, w, " | ".join(
            f"{d[k] / rts:.3f}" for k in ["tasks_run", "deque_steals", "inbox_steals", "index_pops",
                                         "index_stale_pops", "wakes", "global_queue_pops",
                                         "home_requests"])))
    write(a.out, lines)


def large(a):
    rows = []
    print(f"large: {a.response_bytes}-byte responses, {a.total_mib} MiB per run", flush=True)
    bi = ["--bundle", "on", "--incremental", "on"]
    cap = ["--cap-bytes", "65536"]
    uncapped = ["--cap-bytes", "0"]
    # (receive path, consumer, cap, buffers, flags): the runtime's default first, then what each
    # part of it is worth (the cap, streaming), the fallbacks, and a ring big enough for every
    # in-flight response of a worker.
    variants = [("bundle + incremental", "stream", "64 KiB", 256, bi + cap),
                ("bundle + incremental", "whole", "64 KiB", 256, bi + cap + ["--consumer", "whole"]),
                ("bundle + incremental", "stream", "none", 256, bi + uncapped),
                ("bundle + incremental", "whole", "none", 256,
                 bi + uncapped + ["--consumer", "whole"]),
                ("no bundle", "stream", "64 KiB", 256, ["--bundle", "off", "--incremental", "on"] + cap),
                ("no bundle, no incremental", "stream", "64 KiB", 256,
                 ["--bundle", "off", "--incremental", "off"] + cap),
                ("bundle + incremental", "whole", "none", 1024,
                 bi + uncapped + ["--consumer", "whole"])]
    configs = [(v, conns) for conns in a.connections_list for v in variants]
    results = {i: [] for i in range(len(configs))}
    for rep in range(a.repeat):  # interleaved passes, as for the echo benchmark
        for i, ((name, consumer, capname, buffers, flags), conns) in enumerate(configs):
            proc, port = start([os.path.join(a.bin, "epoll-echo"), "--response-bytes",
                                str(a.response_bytes)])
            try:
                out = subprocess.run([os.path.join(a.bin, "large-recv"), "--port", str(port),
                                      "--connections", str(conns), "--workers", str(a.large_workers),
                                      "--response-bytes", str(a.response_bytes),
                                      "--total-mib", str(a.total_mib), "--buffers", str(buffers),
                                      "--buffer-bytes", "16384"] + flags,
                                     check=False, capture_output=True, text=True)
            finally:
                stop(proc)
            if out.returncode != 0:
                sys.stderr.write(out.stderr + out.stdout)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[i].append(r)
            print(f"  pass {rep + 1}: {name:<26} {consumer:<6} cap {capname:<6} {buffers:>4} x 16 KiB "
                  f"{conns:>4} conns  {r['gbps']:.2f} Gbps  cqes/resp {r['cqes_per_response']:.3f}  "
                  f"enobufs {r['enobufs']}  peak held {r['peak_held_buffers']}  "
                  f"sys {r['sys_cpu_pct']:.0f}%", flush=True)
    for i, ((name, consumer, capname, buffers, flags), conns) in enumerate(configs):
        rows.append((name, consumer, capname, buffers, conns,
                     median(results[i], key=lambda r: r["gbps"])))
    lines = [
        "# Large-response benchmark",
        "",
        f"`tests/bench/echo/run_large.sh`, {time.strftime('%Y-%m-%d')}, {machine()}.",
        f"epoll-echo sends a {a.response_bytes // 1024} KiB response per 1-byte request; "
        f"large-recv receives them on the TCP runtime ({a.large_workers} workers, one buffer "
        f"ring per worker), {a.total_mib} MiB per run, median by Gbps of {a.repeat} interleaved "
        "passes, over loopback. Consumer `stream` gives each batch back as soon as it has counted "
        "it (and never needs bytes contiguous); `whole` holds every batch of a response until the "
        "response is complete, as a parser would. Cap: the runtime's per-recv ring credit "
        "(RecvLimits::socket_cap_bytes; none = a recv may take the whole ring). Buffers/CQE: ring "
        "buffers one completion touched, mean. Peak held: most buffers of one worker's ring out "
        "at a 5 ms sample. Stitched bytes: bytes the `whole` consumer had to copy because a "
        "response was more than two contiguous runs (two: the ring wrap). Parks: recvs that waited "
        "for ring credit or buffers, per response. CPU is the receiving process's, in % of one CPU.",
        "",
        "| receive path | consumer | cap | ring per worker | connections | Gbps | CQEs per response | "
        "buffers/CQE | peak held | stitched bytes | ENOBUFS | parks/response | system CPU | "
        "user CPU |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, consumer, capname, buffers, conns, r in rows:
        fail = " (failures!)" if r.get("failed") else ""
        lines.append(f"| {name} | {consumer} | {capname} | {buffers} x 16 KiB | {conns} | "
                     f"{r['gbps']:.2f}{fail} | {r['cqes_per_response']:.3f} | "
                     f"{r['buffers_per_cqe']:.2f} | {r['peak_held_buffers']} | "
                     f"{r['stitched_bytes']} | {r['enobufs']} | {r['parks_per_response']:.3f} | "
                     f"{r['sys_cpu_pct']:.0f}% | {r['user_cpu_pct']:.0f}% |")
    write(a.out, lines)


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["echo", "large"])
    p.add_argument("--bin", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--connections", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--load-threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", default="1 2 4 8")
    p.add_argument("--modes", default="inbox global index@1 index")
    p.add_argument("--response-bytes", type=int, default=65536)
    p.add_argument("--total-mib", type=int, default=4096)
    p.add_argument("--large-connections", default="64 256")
    p.add_argument("--large-workers", type=int, default=2)
    a = p.parse_args()
    a.workers = [int(x) for x in a.workers.split()]
    a.modes = a.modes.split()
    a.connections_list = [int(x) for x in a.large_connections.split()]
    echo(a) if a.what == "echo" else large(a)


if __name__ == "__main__":
    main()
