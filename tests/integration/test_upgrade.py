"""Zero-downtime upgrades (issue 17): `ferryctl upgrade` and SIGUSR2 hand a running ferryd's
listeners, XDP links and maps, AF_XDP sockets and UMEM to a new ferryd started from the binary on
disk. The lab (upgrade_lab.py): client -- ferry gateway -- backends, a UDP service through the
AF_XDP fast path and a TCP proxy service with two backends, every ferryd in the gateway's
namespace, the test the subreaper of the whole lineage of ferryds.

Under load all the time -- 10 numbered UDP flows at 100 datagrams/s each (replies name the
backend), 4 long-lived TCP echo streams (each connection about a second, every byte compared and
checked by sha256 at the backend, so each spans a handover and finishes on the old ferryd while it
drains) and 20 new TCP connections a second -- 20 upgrades in a row: each one a new pid that says
it took over from the old one, the old one gone (exit 0) within the drain timeout plus a margin,
every frame of the new process's slabs accounted for, systemd told MAINPID=new; no datagram lost,
no connection reset, none refused, the fd count back to the first process's. The figures (pause,
took, losses, bytes, fds, RSS) are printed as FIGURE lines.

Failures: a config made invalid before the upgrade (ferryctl exits 1 with FILE:LINE:COL, the old
ferryd serves on and loses nothing, and once the file is fixed an upgrade succeeds); a config
naming a missing interface (the same); SIGKILL of the new ferryd and of the old one at points in
the handover (a ferryd serves afterwards, at worst after a normal restart; where the old serves
on, what it lost is counted). SIGUSR2 upgrades like ferryctl; a second upgrade while one runs is
"busy"."""
import json
import os
import signal
import statistics
import time

import pytest

from fastpath_lab import frames_by_queue, quiescent, total
from harness import FERRYD, ControlClient, TestFailure, check, check_eq, ok, wait_until
from netns import xdp_attached
from test_faults import check_frames_conserved
from upgrade_lab import (DRAIN_TIMEOUT_MS, FASTPATH_UP_LINE, GONE_MARGIN_S, OFFER_LINE,
                         PAUSED_REBIND_LINE, SERVING_LINE, SWAPPED_LINE, Rig, become_subreaper,
                         control_socket_refuses, fd_count, rss_bytes, summarize_tcp, udp_outcome)

UPGRADES = 20
FLOWS = 10
FLOW_BASE = 40000
PERIOD_S = 0.010
FD_TOLERANCE = 2
GONE_S = DRAIN_TIMEOUT_MS / 1000 + GONE_MARGIN_S


@pytest.fixture(scope="module", autouse=True)
def subreaper():
    """A new ferryd whose parent, the old one, exited is this process's child to reap."""
    become_subreaper()


def figure(key, value):
    print(f"  FIGURE {key}: {json.dumps(value)}", flush=True)


def settled_fd_count(pid, target, timeout=10):
    """The fd count of `pid` once it is within FD_TOLERANCE of `target` (closing connections
    take a moment), or what it is after `timeout`."""
    deadline = time.monotonic() + timeout
    while abs(fd_count(pid) - target) > FD_TOLERANCE and time.monotonic() < deadline:
        time.sleep(0.1)
    return fd_count(pid)


def spread(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def wait_proxy_idle(lineage, timeout=10):
    wait_until(lambda: total(lineage, "ferry_proxy_connections_active") == 0, timeout,
               "no proxied connection open", interval=0.05)


def slab_imbalance(lineage, what):
    """Every frame of every slab is somewhere (free, fill, rx, hands, tx, completion): the
    workers publish their account, so this holds under load too. Returns what does not add up
    (empty when all does)."""
    frames, slabs = frames_by_queue(lineage)
    if not frames or set(frames) != set(slabs):
        return [f"{what}: frame gauges per queue {frames}, slabs {slabs}"]
    problems = [f"{what}: queue {q}: {terms} add up to {sum(terms.values())}, the slab has {slabs[q]}"
                for q, terms in frames.items() if sum(terms.values()) != slabs[q]]
    rejected = total(lineage, "ferry_xsk_rejected_frames_total")
    if rejected:
        problems.append(f"{what}: {rejected} frames rejected (freed twice or foreign)")
    return problems


def check_slabs_balanced(lineage, what):
    problems = slab_imbalance(lineage, what)
    check(not problems, "; ".join(problems))


def upgrade_with_ferryctl(lineage, what):
    """`ferryctl --json upgrade`, then the checks every successful upgrade must pass; returns
    the numbers of it."""
    old = lineage.pid
    started = time.monotonic()
    r = lineage.ferryctl("--json", "upgrade")
    took_s = time.monotonic() - started
    check_eq(r.returncode, 0, f"{what}: ferryctl upgrade exit ({r.stdout} {r.stderr})\n"
             f"{lineage.log()[-3000:]}")
    out = json.loads(r.stdout)
    new = out["new_pid"]
    check_eq(out["old_pid"], old, f"{what}: old_pid")
    check(new != old, f"{what}: a new pid {out}")
    lineage.adopt(new)
    status = lineage.status()
    check_eq(status["pid"], new, f"{what}: the control socket is the new ferryd's")
    handover = status["handover"]
    check(isinstance(handover, dict), f"{what}: status.handover {handover}")
    check_eq(handover["from_pid"], old, f"{what}: status.handover.from_pid")
    check_eq((handover["pause_us"], handover["took_ms"]), (out["pause_us"], out["took_ms"]),
             f"{what}: ferryctl's figures are the new ferryd's")
    gone_s, code = lineage.wait_gone(old, GONE_S, "the old ferryd")
    check_eq(code, 0, f"{what}: the old ferryd's exit status")
    return {"old": old, "new": new, "pause_us": out["pause_us"], "took_ms": out["took_ms"],
            "ferryctl_s": took_s, "window": (started, started + took_s), "old_gone_s": gone_s,
            "handover": handover,
            "flows_carried": out.get("flows_carried")}


def test_twenty_upgrades_under_load_lose_nothing(workdir):
    rig = Rig(workdir)
    try:
        lineage = rig.start()
        rig.check_serving("before the upgrades")
        wait_proxy_idle(lineage)
        quiescent(lineage)
        first_pid = lineage.pid
        fds_first, rss_first = fd_count(first_pid), rss_bytes(first_pid)
        flows = rig.udp_flows(FLOWS, FLOW_BASE, PERIOD_S, name="flows")
        wait_until(lambda: flows.dump()["seq"] >= 20, 10, "the UDP flows running", interval=0.05)
        tcp = rig.tcp_load(streams=4, lifetime=1.0, rate=20)
        seq_start = flows.dump()["seq"]
        rounds = []
        failed_upgrade = None
        for i in range(UPGRADES):
            what = f"upgrade {i + 1}"
            seq_before = flows.dump()["seq"]
            try:
                u = upgrade_with_ferryctl(lineage, what)
                u["seq_before"] = seq_before
                u["imbalance"] = slab_imbalance(lineage, what)
                u["fds"] = fd_count(u["new"])
                u["rss"] = rss_bytes(u["new"])
                u["proxied"] = total(lineage, "ferry_proxy_connections_active")
                pause_gauge = total(lineage, "ferry_handover_pause_seconds")
                check(abs(pause_gauge * 1e6 - u["pause_us"]) < 1.0,
                      f"{what}: ferry_handover_pause_seconds {pause_gauge} vs pause_us {u['pause_us']}")
            except TestFailure as e:
                # The figures of the load so far are still worth printing: stop here, report.
                failed_upgrade = str(e)
                failed_at_seq = seq_before
                print(f"  {what}: FAILED: {failed_upgrade[:2000]}", flush=True)
                break
            print(f"  {what}: {u['old']} -> {u['new']} pause {u['pause_us']:.0f} us, took "
                  f"{u['took_ms']:.1f} ms, ferryctl {u['ferryctl_s'] * 1000:.0f} ms, old gone "
                  f"{u['old_gone_s'] * 1000:.0f} ms later, fds {u['fds']} ({u['proxied']} proxied "
                  f"connections), RSS {u['rss'] >> 20} MiB, flows carried {u['flows_carried']}"
                  + "".join(f"\n    FRAMES DO NOT ADD UP: {p}" for p in u["imbalance"]), flush=True)
            rounds.append(u)
        seq_end = flows.dump()["seq"]
        records = tcp.stop()
        udp = flows.settled(seq_start, seq_end)
        # Per upgrade: from the start of it to the start of the next (or the end of the load).
        bounds = [u["seq_before"] for u in rounds] + ([failed_at_seq] if failed_upgrade else []) + [seq_end]
        udp_per_upgrade = [udp_outcome(flows.last_dump, lo, hi)["lost"] for lo, hi in zip(bounds, bounds[1:])]
        flows.stop()
        tcp_summary = summarize_tcp(records, rig.tcp)
        # A stream open before ferryctl started and still streaming after it returned spans a
        # handover: it began on the old ferryd and finished on it while the new one served.
        spanning = sum(1 for r in records if r["kind"] == "stream" and r["result"] == "ok"
                       and any(r["start"] < u["window"][0] and r["end"] > u["window"][1] for u in rounds))
        wait_proxy_idle(lineage)
        try:
            check_frames_conserved(lineage)  # quiet now: nothing in flight, every frame home
            frames_at_end = None
        except TestFailure as e:
            frames_at_end = str(e)
        last = lineage.pid
        fds_last = settled_fd_count(last, fds_first)
        rss_last = rss_bytes(last)

        figure("upgrades", {"asked": UPGRADES, "succeeded": len(rounds)})
        check(rounds, f"no upgrade succeeded: {failed_upgrade}")
        figure("pause_us", spread([round(u["pause_us"]) for u in rounds]))
        figure("took_ms", spread([round(u["took_ms"], 1) for u in rounds]))
        figure("ferryctl_upgrade_ms", spread([round(u["ferryctl_s"] * 1000) for u in rounds]))
        figure("old_gone_after_ms", spread([round(u["old_gone_s"] * 1000) for u in rounds]))
        figure("udp", {"flows": FLOWS, "pps": round(FLOWS / PERIOD_S), "sent": udp["sent"],
                       "lost": udp["lost"], "longest_gap_ms": udp["longest_gap_ms"],
                       "client_stats": udp["stats"], "lost_per_upgrade": udp_per_upgrade})
        figure("tcp_streams", {"connections": tcp_summary["stream"]["total"],
                               "spanning_a_handover": spanning,
                               "bytes_verified": tcp_summary["stream"]["bytes_verified"],
                               "ends": tcp_summary["stream"]["ends"]})
        new_ok = tcp_summary["new"]["ends"].get("ok", 0)
        figure("tcp_new_connections", {"rate_per_s": 20, "ok": new_ok,
                                       "failed": tcp_summary["new"]["total"] - new_ok,
                                       "ends": tcp_summary["new"]["ends"],
                                       "bytes_verified": tcp_summary["new"]["bytes_verified"]})
        figure("fds", {"first": fds_first, "last": fds_last,
                       "after_each_upgrade": spread([u["fds"] for u in rounds])})
        figure("rss_mib", {"first": round(rss_first / 2**20, 1), "last": round(rss_last / 2**20, 1),
                           "after_each_upgrade_max": round(max(u["rss"] for u in rounds) / 2**20, 1)})
        figure("flows_carried", spread([u["flows_carried"] or 0 for u in rounds]))

        figure("upgrades_with_unbalanced_slabs", sum(1 for u in rounds if u["imbalance"]))
        check(failed_upgrade is None, f"upgrade {len(rounds) + 1} of {UPGRADES} failed: {failed_upgrade}")
        check_eq(udp["lost"], 0, f"UDP datagrams lost over {UPGRADES} upgrades")
        check_eq((udp["stats"]["bad"], udp["stats"]["malformed"], udp["stats"]["dups"]), (0, 0, 0),
                 f"UDP replies not from the VIP, malformed or twice {udp['stats']}")
        moved = {p: b for p, b in udp["backends"].items() if len(b) != 1}
        check_eq(moved, {}, "UDP flows answered by more than one backend across the upgrades")
        for kind in ("stream", "new"):
            s = tcp_summary[kind]
            check_eq(s["ends"].get("reset", 0), 0, f"TCP {kind} connections reset {s['failures']}")
            check_eq(s["ends"].get("refused", 0), 0, f"TCP {kind} connections refused {s['failures']}")
            check_eq(s["total"] - s["ends"].get("ok", 0), 0, f"TCP {kind} connections failed {s['failures']}")
        check(tcp_summary["new"]["total"] >= 10 * (rounds[-1]["window"][1] - rounds[0]["window"][0]),
              f"new connections at about 20/s: {tcp_summary['new']['total']}")
        check(spanning >= UPGRADES // 2, f"streams open across a handover: {spanning}")
        imbalance = [p for u in rounds for p in u["imbalance"]]
        check(not imbalance, f"frames conserved after every upgrade: {imbalance[:4]}")
        check(frames_at_end is None, f"frames at the end, the load stopped: {frames_at_end}")
        check(abs(fds_last - fds_first) <= FD_TOLERANCE,
              f"fds of the last ferryd {fds_last} vs the first's {fds_first}")
        notified = lineage.main_pids_notified()
        check_eq(notified, [u["new"] for u in rounds], "MAINPID= sent for every new ferryd")
        rig.check_serving("after the upgrades")
    finally:
        rig.close()


def expect_upgrade_refused(rig, what, needle):
    """ferryctl upgrade exits 1 saying why; the old ferryd answers with upgrade.state failed and
    keeps the fast path; the new process is gone. Returns ferryctl's stderr."""
    lineage = rig.lineage
    old = lineage.pid
    failed_before = total(lineage, "ferry_upgrades_total", result="failed")
    r = lineage.ferryctl("upgrade")
    print(f"  {what}: ferryctl exit {r.returncode}: {r.stderr.strip()}", flush=True)
    check_eq(r.returncode, 1, f"{what}: ferryctl upgrade exit ({r.stdout} {r.stderr})")
    check("ferryctl: upgrade failed: " in r.stderr, f"{what}: ferryctl says it failed: {r.stderr}")
    check(needle in r.stderr, f"{what}: ferryctl names the reason {needle!r}: {r.stderr}")
    status = lineage.status()
    check_eq(status["pid"], old, f"{what}: the old ferryd answers")
    up = status["upgrade"]
    check_eq(up["state"], "failed", f"{what}: status.upgrade {up}")
    check(needle in (up["error"] or ""), f"{what}: status.upgrade.error {up}")
    new = up["new_pid"]
    check(isinstance(new, int) and new != old, f"{what}: status.upgrade.new_pid {up}")
    lineage.wait_gone(new, 5, "the failed new ferryd")
    wait_until(lambda: lineage.exit_code(new) == "gone" and os.path.exists(f"/proc/{new}") is False,
               5, f"the failed ferryd {new} reaped (no zombie)")
    check(f"upgrade: the new ferryd (pid {new}) failed: " in lineage.log()
          and "this ferryd serves on" in lineage.log(), f"{what}: the old ferryd's log line")
    check_eq(total(lineage, "ferry_upgrades_total", result="failed"), failed_before + 1,
             f"{what}: ferry_upgrades_total{{result=failed}}")
    check(status["handover"] is None, f"{what}: the old ferryd took over from nobody")
    return r.stderr


def refused_upgrade_under_load(w, break_config, reason_of, tag):
    """The shape of both config failures: loads on, the file broken, ferryctl refused, the old
    serves through it all and loses nothing; the file fixed, an upgrade succeeds."""
    rig = Rig(w)
    try:
        lineage = rig.start()
        good = rig.config()
        rig.check_serving(f"{tag}: before")
        flows = rig.udp_flows(FLOWS, FLOW_BASE, PERIOD_S, name="flows")
        wait_until(lambda: flows.dump()["seq"] >= 20, 10, "the UDP flows running", interval=0.05)
        tcp = rig.tcp_load(streams=2, lifetime=1.0, rate=20)
        seq_start = flows.dump()["seq"]
        path = break_config(rig, good)
        expect_upgrade_refused(rig, tag, reason_of(rig, path))
        rig.check_serving(f"{tag}: the old ferryd after the failed upgrade")
        check_slabs_balanced(lineage, f"{tag}: after the failed upgrade")
        seq_mid = flows.dump()["seq"]
        refused = flows.settled(seq_start, seq_mid)
        figure(f"{tag}_while_refused", {k: refused[k] for k in ("sent", "lost", "longest_gap_ms")})
        check_eq(refused["lost"], 0, f"{tag}: UDP lost while the old ferryd served on")
        w.write_config(good)
        u = upgrade_with_ferryctl(lineage, f"{tag}: the upgrade after fixing the file")
        print(f"  {tag}: fixed file: {u['old']} -> {u['new']} pause {u['pause_us']:.0f} us", flush=True)
        seq_end = flows.dump()["seq"]
        records = tcp.stop()
        fixed = flows.settled(seq_mid, seq_end)
        flows.stop()
        s = summarize_tcp(records, rig.tcp)
        figure(f"{tag}_after_fix", {"udp": {k: fixed[k] for k in ("sent", "lost", "longest_gap_ms")},
                                    "tcp_streams": s["stream"]["ends"], "tcp_new": s["new"]["ends"],
                                    "pause_us": round(u["pause_us"])})
        for kind in ("stream", "new"):
            check_eq(s[kind]["total"] - s[kind]["ends"].get("ok", 0), 0,
                     f"{tag}: TCP {kind} connections failed {s[kind]['failures']}")
        check_eq(fixed["lost"], 0, f"{tag}: UDP lost over the upgrade after the fix")
        check_frames_conserved(lineage)
        rig.check_serving(f"{tag}: after")
    finally:
        rig.close()


def test_invalid_config_refused_with_its_position_and_the_old_serves_on(workdir):
    def break_config(rig, good):
        bad = json.loads(json.dumps(good))
        bad["tcp"]["proxy"]["drain_timeout_ms"] = 4000000
        return rig.w.write_config(bad)

    def reason_of(rig, path):
        # FILE:LINE:COL as ferryd itself reports it: what --check-config says of the file.
        r = rig.lab.gw.run(FERRYD, "--check-config", "--config", path, check=False)
        check_eq(r.returncode, 78, f"--check-config of the broken file: {r.stderr}")
        line = r.stderr.strip().splitlines()[-1]
        check(line.startswith(f"{path}:") and "drain_timeout_ms" in line, f"FILE:LINE:COL: {line}")
        return line
    refused_upgrade_under_load(workdir, break_config, reason_of, "invalid_config")


def test_missing_interface_refused_and_the_old_serves_on(workdir):
    def break_config(rig, good):
        bad = json.loads(json.dumps(good))
        bad["xdp"]["interfaces"].append({"name": "nope9"})
        return rig.w.write_config(bad)
    refused_upgrade_under_load(workdir, break_config, lambda rig, path: "nope9", "missing_interface")


# Where in the handover a kill lands: the log line it waits for (None: the upgrade's reply, i.e.
# the new process has just been spawned) and a delay after it. The new ferryd logs the offer it
# got, its program swapped into each link, its fast path set up (just before it says "ready" and
# the old one pauses its workers for it: the pause is under a millisecond, so "+ 1 ms" lands
# around it, either side), then "serving".
KILL_POINTS = [("spawned", None, 0.0), ("offer received", OFFER_LINE, 0.0),
               ("program swapped in", SWAPPED_LINE, 0.0), ("fast path set up", FASTPATH_UP_LINE, 0.0),
               ("fast path set up + 1 ms", FASTPATH_UP_LINE, 0.001),
               ("serving", SERVING_LINE, 0.0)]


def kill_during_handover(w, victim):
    """Starts upgrades and SIGKILLs the new ("new") or the old ("old") ferryd at each point of
    KILL_POINTS, UDP flows running throughout. Afterwards some ferryd must serve UDP and TCP:
    the survivor, or at worst one started afresh."""
    rig = Rig(w)
    outcomes = []
    try:
        lineage = rig.start()
        rig.check_serving("before")
        flows = rig.udp_flows(4, FLOW_BASE, PERIOD_S, name="flows")
        wait_until(lambda: flows.dump()["seq"] >= 20, 10, "the UDP flows running", interval=0.05)
        for n, (point, needle, delay) in enumerate(KILL_POINTS):
            what = f"SIGKILL of the {victim} ferryd at '{point}'"
            old = lineage.pid
            since = lineage.log_size()
            seq_before = flows.dump()["seq"]
            new = ok(lineage.request("upgrade"), "upgrade")["new_pid"]
            if needle:
                lineage.wait_log([needle], since, 30)
            if delay:
                time.sleep(delay)  # the point in the handover, not a wait for anything
            os.kill(new if victim == "new" else old, signal.SIGKILL)
            try:
                outcome = settle_after_kill(rig, lineage, victim, old, new, since, what, n)
            except TestFailure as e:
                # Recorded, and the next point starts from a ferryd started afresh.
                outcome = {"outcome": "FAILED", "why": str(e)[:1500]}
                start_over(lineage, n)
            seq_after = flows.dump()["seq"]
            udp = flows.settled(seq_before, seq_after)
            outcome.update(point=point, udp_sent=udp["sent"], udp_lost=udp["lost"],
                           longest_gap_ms=udp["longest_gap_ms"])
            print(f"  {what}: {outcome}", flush=True)
            outcomes.append(outcome)
        flows.stop()
        figure(f"sigkill_{victim}", outcomes)
    finally:
        rig.close()
    return outcomes


def start_over(lineage, n):
    """After a failed point: every ferryd of the lineage SIGKILLed, one started afresh."""
    for pid in lineage.pids:
        if lineage.alive(pid):
            os.kill(pid, signal.SIGKILL)
            lineage.wait_gone(pid, 10)
    lineage.start(f"afresh{n}")


def settle_after_kill(rig, lineage, victim, old, new, since, what, n):
    """What became of a handover whose `victim` was SIGKILLed, and a serving ferryd after it."""
    if victim == "new":
        line = lineage.wait_log([f"(pid {new}) failed", f"handed over to ferryd pid {new}"], since, 30)
        lineage.wait_gone(new, 10, "the killed new ferryd")
        if f"(pid {new}) failed" in line:
            status = lineage.status()
            check_eq(status["pid"], old, f"{what}: the old ferryd answers")
            check_eq(status["upgrade"]["state"], "failed", f"{what}: status.upgrade")
            rebound = PAUSED_REBIND_LINE in read_from(lineage, since)
            rig.check_serving(f"{what}: the old ferryd serving on")
            check_slabs_balanced(lineage, what)
            return {"outcome": "old served on", "fast_path_rebound": rebound}
        # Handed over, then killed: the old one drains and exits, nothing serves any more.
        _, code = lineage.wait_gone(old, GONE_S, "the old ferryd after handing over")
        check_eq(code, 0, f"{what}: the old ferryd's exit status")
        return restart(rig, lineage, what, n, "handed over, then the new was killed")
    # The old one killed: the new one serves, or fails and goes.
    def settled():
        if not lineage.alive(new):
            return "new exited"
        try:
            st = lineage.status()
        except (OSError, TestFailure):
            return None
        if st["pid"] == new and (st.get("handover") or {}).get("from_pid") == old:
            return "new took over"
        return None
    outcome = wait_until(settled, 40, f"{what}: the new ferryd ({new}) to serve or exit", interval=0.02)
    lineage.wait_gone(old, 5, "the killed old ferryd")
    if outcome == "new took over":
        lineage.adopt(new)
        rig.check_serving(f"{what}: the new ferryd")
        check_slabs_balanced(lineage, what)
        return {"outcome": outcome}
    return restart(rig, lineage, what, n, f"{outcome} ({lineage.exit_code(new)})")


def read_from(lineage, since):
    with open(lineage.daemon.log_path, "rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")


def restart(rig, lineage, what, n, how):
    """A normal start of ferryd after a failed handover left nothing serving; it must serve."""
    # What a supervisor's restart finds: the dead ferryds' kernel objects released (a killed
    # process's io_uring and XDP links are torn down after it is reaped), awaited here.
    started = time.monotonic()
    wait_until(lambda: (control_socket_refuses(lineage.socket_path)
                        and not any(xdp_attached(rig.lab.gw, i) for i in ("g0", "g1"))), 10,
               f"{what}: the control socket and the XDP links released", interval=0.005)
    released_s = time.monotonic() - started
    started = time.monotonic()
    try:
        lineage.start(f"restart{n}")
    except TestFailure as e:
        d = lineage.daemons[-1]
        raise TestFailure(f"{what}: a normal restart failed ({e}); its log:\n{d.log()}\nthe "
                          f"lineage's log:\n{lineage.daemons[-2].log()[-3000:]}") from None
    ready_s = time.monotonic() - started
    rig.check_serving(f"{what}: a ferryd started afresh", complete=False)
    return {"outcome": f"{how}; restarted", "released_after_ms": round(released_s * 1000),
            "restart_ready_s": round(ready_s, 2)}


def check_no_failed_point(outcomes, victim):
    failed = [o for o in outcomes if o["outcome"] == "FAILED"]
    check(not failed, f"points where no ferryd served after the SIGKILL of the {victim} one "
          f"(without a restart the test had to do): {failed}")


def test_sigkill_of_the_new_mid_handover_leaves_a_serving_ferryd(workdir):
    outcomes = kill_during_handover(workdir, "new")
    check_no_failed_point(outcomes, "new")
    # Until the old ferryd pauses its workers for the new one, it never stops forwarding.
    unpaused = [o for o in outcomes if o["outcome"] == "old served on" and not o["fast_path_rebound"]]
    check_eq([o["udp_lost"] for o in unpaused], [0] * len(unpaused),
             f"UDP lost where the old ferryd had not paused: {unpaused}")


def test_sigkill_of_the_old_mid_handover_leaves_a_serving_ferryd(workdir):
    check_no_failed_point(kill_during_handover(workdir, "old"), "old")


def taken_over_from(lineage, old):
    """The status of a ferryd that took over from `old`, once one answers the control socket
    (between the two, a connection may fail or the old one may still answer)."""
    try:
        st = lineage.status()
    except (OSError, TestFailure):
        return None
    return st if st["pid"] != old and (st["handover"] or {}).get("from_pid") == old else None


def test_sigusr2_upgrades_and_a_second_upgrade_meanwhile_is_busy(workdir):
    rig = Rig(workdir)
    try:
        lineage = rig.start()
        rig.check_serving("before")
        old = lineage.pid
        os.kill(old, signal.SIGUSR2)

        status = wait_until(lambda: taken_over_from(lineage, old), 30,
                            "a new ferryd to take over after SIGUSR2")
        new = status["pid"]
        lineage.adopt(new)
        gone_s, code = lineage.wait_gone(old, GONE_S, "the old ferryd")
        check_eq(code, 0, "the old ferryd's exit status after SIGUSR2")
        h = status["handover"]
        print(f"  SIGUSR2: {old} -> {new}: {h}; old gone {gone_s * 1000:.0f} ms later", flush=True)
        check(h["at"].endswith("Z"), f"status.handover.at {h['at']}")
        check_eq(status["upgrade"]["state"], "idle", "status.upgrade in the new ferryd")
        check_eq(lineage.main_pids_notified(), [new], "MAINPID=")
        rig.check_serving("after SIGUSR2")

        # While an upgrade runs, another one is refused.
        with ControlClient(lineage.socket_path) as c:
            first = ok(c.request("upgrade"), "upgrade")
            second = c.request("upgrade")
        check(not second.get("ok") and second["error"]["code"] == "busy",
              f"a second upgrade while one runs: {second}")
        status = wait_until(lambda: taken_over_from(lineage, first["old_pid"]), 30,
                            "the first upgrade to finish")
        check_eq(status["pid"], first["new_pid"], "the pid that took over")
        lineage.adopt(first["new_pid"])
        lineage.wait_gone(first["old_pid"], GONE_S, "the old ferryd")
        rig.check_serving("after the busy upgrade")
        # Last, so that the behaviour above is checked whatever the shape: the spec's keys.
        missing = {"from_pid", "pause_us", "took_ms", "at", "flows_carried", "frames_in_flight"} - set(h)
        check_eq(sorted(missing), [], f"keys of status.handover missing (it has {sorted(h)})")
    finally:
        rig.close()
