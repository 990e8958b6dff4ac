#!/usr/bin/env python3
"""The soak driver behind `make soak`: one ferryd in the fast-path lab serving UDP (echo, health
checked) and a TCP proxy service under steady load for SOAK_SECONDS, with a reload every second
and a UDP and a TCP backend flapping; samples RSS, fds, UMEM frames and error counters and prints
a markdown table. Exits 1 when the daemon died, frames were not conserved or fds leaked."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from fastpath_lab import BACKENDS, PORT, frames_by_queue, inside, quiescent, samples, total  # noqa: E402,E501
from harness import Daemon, TestFailure, Workdir, ok  # noqa: E402
from proxy_peers import Backend, read_rss_bytes  # noqa: E402
from test_faults import Rig, fd_count  # noqa: E402
from test_health import TCP_LISTENER  # noqa: E402

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

        path = w.write_config(config(0))
        d = Daemon(w, path, netns=rig.lab.gw.name)
        try:
            d.wait_ready()
            time.sleep(1.0)  # health checks mark everything up
            res = rig.lab.converse("warm", flows=6, rounds=1)
            if res["ok"] != 6:
                raise TestFailure(f"UDP not served before the soak: {res}")
            started = time.monotonic()
            rows.append(sample(d, "start (quiet)", started))
            rig.start_loads(udp_pps=int(os.environ.get("SOAK_UDP_PPS", "2000")))
            next_sample = started + every
            deadline = started + seconds
            flips = 0
            udp_check = {"ok": 0, "lost": 0}
            while time.monotonic() < deadline:
                flips += 1
                w.write_config(config(flips % 2))
                r = d.request("reload")
                if not r.get("ok"):
                    failures.append(f"reload {flips}: {r}")
                if flips % 10 == 5:  # a UDP backend's health listener goes away ...
                    listeners.pop(BACKENDS[2]).kill()
                if flips % 10 == 8:  # ... and comes back three seconds later
                    listen(BACKENDS[2])
                if flips % 15 == 7:  # a TCP backend restarts on the same port
                    port = rig.tcp[1].port
                    rig.tcp[1].kill()
                    rig.tcp[1].stop()
                    with inside(rig.lab.gw):
                        rig.tcp[1] = Backend([f"127.0.0.1:{port}"])
                if flips % 20 == 0:
                    res = rig.lab.converse(f"soak{flips}", flows=4, rounds=1, base=25000)
                    udp_check["ok"] += res["ok"]
                    udp_check["lost"] += res["lost"]
                if d.proc.poll() is not None:
                    raise TestFailure(f"ferryd died: {d.log()[-3000:]}")
                if time.monotonic() >= next_sample:
                    rows.append(sample(d, "under load", started))
                    next_sample += every
                time.sleep(1.0)
            load = rig.stop_loads()
            if BACKENDS[2] not in listeners:
                listen(BACKENDS[2])
            quiescent(d)
            time.sleep(2.0)  # closed proxied connections and health sockets settle
            rows.append(sample(d, "end (quiet)", started))
            print(table(rows))
            print(f"\nTCP load: {load}; UDP request/reply checks during the soak: {udp_check}; "
                  f"{flips} reloads, {flips // 10} UDP and {flips // 15} TCP backend flaps")
            if not all(r["conserved"] for r in rows):
                failures.append("UMEM frames not conserved in some sample")
            if rows[-1]["rejected_frames"]:
                failures.append("frames freed twice or foreign")
            if rows[-1]["fds"] != rows[0]["fds"]:
                failures.append(f"fds {rows[0]['fds']} at start, {rows[-1]['fds']} at the end")
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
