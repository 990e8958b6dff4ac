#!/usr/bin/env python3
"""The soak driver behind `make soak`: one ferryd in the fast-path lab serving UDP (echo, health
checked) and a TCP proxy service under steady load for SOAK_SECONDS, with a reload every second
and a UDP and a TCP backend flapping; samples RSS, fds, UMEM frames and error counters and prints
a markdown table. The TCP generator (tcp_load.py) reports every failed connection with its cause
and time; tcp_failures.py matches each to the backend kill that explains it. Exits 1 when the
daemon died, frames were not conserved or fds leaked, or a TCP failure is unexplained."""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from fastpath_lab import (BACKENDS, PORT, VIP, frames_by_queue, inside, quiescent, samples,  # noqa: E402
                          total)
from harness import Daemon, TestFailure, Workdir, ok  # noqa: E402
from proxy_peers import Backend, read_rss_bytes  # noqa: E402
from test_faults import TCP_PORT, UDP_LOAD, Rig, fd_count  # noqa: E402
from test_health import TCP_LISTENER  # noqa: E402
from tcp_failures import Kill, breakdown, explain_all, failure_lines, kill_table  # noqa: E402

TCP_LOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcp_load.py")

HEALTH = {"interval_ms": 200, "timeout_ms": 150, "rise": 2, "fall": 2}


def sample(d, label, started):
    frames, slabs = frames_by_queue(d)
    conserved = all(sum(t.values()) == slabs[q] for q, t in frames.items())
    in_flight = sum(t[k] for t in frames.values() for k in ("rx", "hands", "tx", "completion"))
    drops = {}
    for labels, v in samples(d, "ferry_xsk_drops_total"):
        drops[labels["reason"]] = drops.get(labels["reason"], 0) + v
    return {
        "when": label, "t_s": round(time.monotonic() - started),
        "rss_kib": read_rss_bytes(d.proc.pid) // 1024, "fds": fd_count(d.proc.pid),
        "frames_in_flight": int(in_flight),
        "frames_fill": int(sum(t["fill"] for t in frames.values())),
        "conserved": conserved,
        "rejected_frames": int(total(d, "ferry_xsk_rejected_frames_total")),
        "xsk_drops": int(sum(drops.values())),
        "no_backend": int(drops.get("no_backend", 0)),
        "proxy_failed": int(total(d, "ferry_proxy_connections_failed_total")),
        "reloads": ok(d.request("status"))["reloads"],
    }


def fd_targets(pid):
    """{fd: what it is}: the readlink, with a socket's line from the daemon's /proc/net tables."""
    inodes = {}
    for table_name in ("tcp", "tcp6", "udp", "udp6", "unix", "netlink", "raw", "packet"):
        try:
            with open(f"/proc/{pid}/net/{table_name}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            for field in line.split():
                if field.isdigit() and len(field) > 3:
                    inodes.setdefault(field, f"{table_name}: {line.strip()}")
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            target += " " + inodes.get(target[8:-1], "(in no /proc/net table)")
        out[int(fd)] = target
    return out


def table(rows):
    keys = list(rows[0])
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(out)


def main():
    seconds = float(os.environ.get("SOAK_SECONDS", "600"))
    every = float(os.environ.get("SOAK_SAMPLE_SECONDS", str(max(10.0, seconds / 10))))
    w = Workdir()
    rig = None
    rows, failures = [], []
    try:
        rig = Rig(w, tcp_backends=2)
        listeners = {}

        def listen(addr):
            p = rig.lab.spawn(rig.lab.back, TCP_LISTENER, addr, str(PORT))
            if p.stdout.readline().strip() != "ready":
                raise TestFailure(f"health listener on {addr}")
            listeners[addr] = p

        for addr in BACKENDS:
            listen(addr)

        def config(flip):
            cfg = rig.config(health=HEALTH)
            web = cfg["services"][1]
            web["backends"] = [b.endpoint() for b in rig.tcp]
            web["health"] = dict(HEALTH)
            web["balance"] = "round_robin"
            # What a reload changes each second: the "web" service's per-service cap.
            web["max_connections"] = 10000 + flip
            return cfg

        hello_at = {}  # connection id -> (backend label, its end as that backend saw it)
        generation = [0, 0]

        def label(i):
            return f"web[{i}]#{generation[i]}"

        def collect(i, b):
            with b.cond:
                for conn_id in b.hellos:
                    end = b.closed.get(conn_id)
                    hello_at[conn_id] = (label(i), end["end"] if end else None)

        def kill_tcp_backend(i):
            """SIGKILLs backend i under load and starts a new process on its port."""
            old = rig.tcp[i]
            t_kill = time.monotonic()
            old.kill()  # SIGKILL, then reaped
            t_dead = time.monotonic()
            old.reader.join(timeout=10)  # every hello/closed line the process wrote before it died
            collect(i, old)
            with old.cond:
                open_ids = set(old.hellos) - set(old.closed)
            k = Kill(label(i), old.port, t_kill, t_dead, open_ids)
            old.stop()
            generation[i] += 1
            with inside(rig.lab.gw):
                rig.tcp[i] = Backend([f"127.0.0.1:{old.port}"])
            k.t_ready = time.monotonic()
            return k

        path = w.write_config(config(0))
        d = Daemon(w, path, netns=rig.lab.gw.name)
        try:
            d.wait_ready()
            time.sleep(1.0)  # health checks mark everything up
            res = rig.lab.converse("warm", flows=6, rounds=1)
            if res["ok"] != 6:
                raise TestFailure(f"UDP not served before the soak: {res}")
            started = time.monotonic()
            fds_before = fd_targets(d.proc.pid)
            rows.append(sample(d, "start (quiet)", started))
            fds_at_start = fd_targets(d.proc.pid)
            for fd in sorted(set(fds_before) ^ set(fds_at_start)):
                print(f"fd {fd} came or went during the start sample: {fds_before.get(fd)} -> "
                      f"{fds_at_start.get(fd)}")
            udp_pps = os.environ.get("SOAK_UDP_PPS", "2000")
            udp_load = rig.lab.spawn(rig.lab.client, UDP_LOAD, VIP, str(PORT), udp_pps)
            with open(TCP_LOAD) as f:
                tcp_load = rig.lab.spawn(rig.lab.gw, f.read(), str(TCP_PORT))
            next_sample = started + every
            deadline = started + seconds
            flips = 0
            udp_check = {"ok": 0, "lost": 0}
            reload_times, kills = [], []
            while time.monotonic() < deadline:
                flips += 1
                tick = time.monotonic()
                w.write_config(config(flips % 2))
                reload_times.append(time.monotonic())
                r = d.request("reload")
                if not r.get("ok"):
                    failures.append(f"reload {flips}: {r}")
                if flips % 10 == 5:  # a UDP backend's health listener goes away ...
                    listeners.pop(BACKENDS[2]).kill()
                if flips % 10 == 8:  # ... and comes back three seconds later
                    listen(BACKENDS[2])
                if flips % 15 == 7:
                    # A TCP backend restarts on the same port, half a second away from any reload
                    # so that a drop a reload caused cannot pass for one the kill caused
                    # (tcp_failures.QUEUED_WINDOW_S).
                    time.sleep(max(0.0, tick + 0.5 - time.monotonic()))
                    kills.append(kill_tcp_backend(1))
                if flips % 20 == 0:
                    res = rig.lab.converse(f"soak{flips}", flows=4, rounds=1, base=25000)
                    udp_check["ok"] += res["ok"]
                    udp_check["lost"] += res["lost"]
                if d.proc.poll() is not None:
                    raise TestFailure(f"ferryd died: {d.log()[-3000:]}")
                if time.monotonic() >= next_sample:
                    rows.append(sample(d, "under load", started))
                    next_sample += every
                next_tick = tick + 1.0
                if kills:  # the next reload stays 0.5 s away from the last kill too
                    next_tick = max(next_tick, kills[-1].t_kill + 0.5)
                time.sleep(max(0.0, next_tick - time.monotonic()))
            udp_load.kill()
            udp_load.wait()
            tcp_load.send_signal(signal.SIGTERM)  # ip netns exec passes it on to python
            out, _ = tcp_load.communicate(timeout=10)
            load = json.loads(out.strip().splitlines()[-1])
            if BACKENDS[2] not in listeners:
                listen(BACKENDS[2])
            quiescent(d)
            # Closed proxied connections settle; a health check's socket may be open for a moment.
            settle_until = time.monotonic() + 5.0
            time.sleep(2.0)
            while fd_count(d.proc.pid) != len(fds_at_start) and time.monotonic() < settle_until:
                time.sleep(0.2)
            rows.append(sample(d, "end (quiet)", started))
            fds_at_end = fd_targets(d.proc.pid)
            for i, b in enumerate(rig.tcp):
                collect(i, b)
            unexplained = explain_all(load["failures"], kills, hello_at, reload_times)
            raw = os.environ.get("SOAK_TCP_OUT")
            if raw:  # everything the breakdown was made from, times relative to the start
                with open(raw, "w") as f:
                    json.dump({"ok": load["ok"], "failures": [
                        dict(x, t_start=x["t_start"] - started, t_end=x["t_end"] - started)
                        for x in load["failures"]],
                        "reloads": [t - started for t in reload_times],
                        "kills": [{"backend": k.label, "t_kill": k.t_kill - started,
                                   "t_dead": k.t_dead - started, "t_ready": k.t_ready - started,
                                   "open_ids": sorted(k.open_ids)} for k in kills]}, f, indent=1)
            print(table(rows))
            print(f"\nTCP load: {load['ok']} connections echoed, {load['failed']} failed; "
                  f"UDP request/reply checks during the soak: {udp_check}; "
                  f"{flips} reloads, {flips // 10} UDP and {len(kills)} TCP backend flaps\n")
            proxy = {name: int(total(d, f"ferry_proxy_{name}_total"))
                     for name in ("connections", "connections_failed", "connections_refused",
                                  "retries", "resets", "idle_timeouts")}
            print(f"ferryd's proxy counters: {proxy}\n")
            print("TCP failures by cause and explanation:\n")
            print(breakdown(load["failures"]) + "\n")
            print("TCP backend kills:\n")
            print(kill_table(kills, started) + "\n")
            print("Each TCP failure (t from the soak's start):")
            print(failure_lines(load["failures"], started))
            if unexplained:
                failures.append(f"{len(unexplained)} TCP connection failures no event explains")
            if load["failed"] > len(load["failures"]):
                failures.append(f"{load['failed']} TCP connections failed, only the first "
                                f"{len(load['failures'])} were kept to explain")
            if any(f["cause"] == "wrong_bytes" for f in load["failures"]):
                failures.append("a TCP echo came back with wrong bytes")
            if not all(r["conserved"] for r in rows):
                failures.append("UMEM frames not conserved in some sample")
            if rows[-1]["rejected_frames"]:
                failures.append("frames freed twice or foreign")
            # The fds listed at the start (quiet), not the sample's count a moment before: a
            # health check's socket can come or go between the two.
            if len(fds_at_end) != len(fds_at_start):
                failures.append(f"fds {len(fds_at_start)} at start, {len(fds_at_end)} at the end")
                for fd in sorted(set(fds_at_start) | set(fds_at_end)):
                    before, after = fds_at_start.get(fd), fds_at_end.get(fd)
                    if before != after:
                        print(f"fd {fd}: at start {before}; at the end {after}")
            if rows[-1]["frames_in_flight"]:
                failures.append("frames still in flight once quiet")
        finally:
            d.cleanup()
        out = os.environ.get("SOAK_OUT")
        if out:
            with open(out, "w") as f:
                f.write(table(rows) + "\n")
    finally:
        if rig:
            rig.close()
        w.cleanup()
    for f in failures:
        print(f"FAIL: {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
