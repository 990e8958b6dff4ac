"""A fleet of two ferry gateways behind a BGP router with ECMP (issue: announce VIPs as routes).
The fleet lab (fleet_lab.py): a router namespace running BIRD with ECMP (merge paths, layer-4
multipath hash) towards two gateway namespaces, each running ferryd (`announce` into table 100)
and its own BIRD with an eBGP session to the router (hold 3 s, keepalive 1 s); a client behind
the router; three backends behind both gateways, whose replies leave through either gateway.

64 numbered UDP flows at 100 datagrams/s each run through the whole test; every reply names its
backend, and a missing reply is 10 ms of loss on its flow. It shows: the router holds each VIP
with two next hops and the flows spread over both gateways; every flow keeps the backend it had
through one gateway only; SIGTERM of one ferryd withdraws its VIPs and every flow continues over
the other gateway on the same backend (loss measured); SIGKILL followed by the unit's ExecStopPost
(`ferryd --withdraw`) the same; every UDP backend down in one gateway's view (its health checks
refused there) withdraws the UDP VIP there only; restarts announce again and the flows spread
again. TCP connections through a host that leaves are lost (a terminating proxy cannot move them;
so are those whose hash moves to a host that joins): counted, and new connections reach the
remaining host. The figures are printed (FIGURE lines) and written to the work dir
(fleet-figures.json).

The health case is also the check of announce.settle_ms and of the flow reset on re-announce:
the gateway whose view failed moved some flows while its backends went down one by one (and it
still announced); after it has withdrawn, the other gateway carries them on their baseline
backends, and when it announces again its flow-table entries from before are forgotten, so the
flows the router brings back keep their baseline backends (without the reset 16 to 23 of its 30
flows changed backend)."""
import json
import signal
import subprocess
import time

from fastpath_lab import total
from fleet_lab import (BACKENDS, PROTO, TABLE, TCP_VIP, UDP_PORT, UDP_VIP, UPLINK, VIPS, FleetLab,
                       FlowClient, TcpClient, backend_of, gateway_config)
from harness import FERRYD, Daemon, TestFailure, check, check_eq, ferryctl, ok, wait_until
from netns import xdp_attached

FLOWS = 64
FLOW_BASE = 41000
PERIOD_S = 0.010
IN_FLIGHT = 20         # the last ticks of a window, whose replies may still be on their way
SETTLE_S = 1.5         # traffic judged after a change: this long past convergence
MAX_LOSS_MS = 1000     # per flow, for any failover here
MAX_SIGTERM_LOSS_MS = 100  # per flow: the routers converge within withdraw_grace_ms (1000 ms)
TCP_CONNS = 32
HEALTH_TIMEOUT_S = 10
BOTH = sorted(UPLINK[n][1] for n in (1, 2))  # the router's next hops while both gateways announce


class Parts:
    """Named groups of checks that report and carry on, failing the test at the end with all."""

    def __init__(self):
        self.failures = []
        self.passed = 0

    def part(self, name):
        parts = self

        class Part:
            def __enter__(self):
                return self

            def __exit__(self, kind, exc, tb):
                if exc is None:
                    parts.passed += 1
                    print(f"  check ok: {name}", flush=True)
                    return False
                if not isinstance(exc, (AssertionError, KeyError, ValueError, TypeError)):
                    return False
                parts.failures.append(f"{name}: {exc}")
                print(f"  CHECK FAILED {name}: {exc}", flush=True)
                return True
        return Part()

    def done(self):
        print(f"  checks: {self.passed} ok, {len(self.failures)} failed", flush=True)
        if self.failures:
            raise TestFailure(f"{len(self.failures)} check group(s) failed:\n  "
                              + "\n  ".join(self.failures))


class Gateway:
    """ferryd in gateway namespace n: started, stopped, killed and withdrawn as the unit would."""

    def __init__(self, lab, w, n):
        self.lab, self.w, self.n = lab, w, n
        self.config_path = w.write_config(gateway_config(w, n), name=f"ferryd{n}.json")
        self.daemon = None
        self.runs = []

    def start(self):
        self.daemon = Daemon(self.w, self.config_path, name=f"ferryd{self.n}-{len(self.runs) + 1}",
                             netns=self.lab.gw[self.n].name)
        self.runs.append(self.daemon)
        self.daemon.wait_ready()
        return self.daemon

    def sigterm(self):
        self.daemon.signal(signal.SIGTERM)

    def wait_exit(self, timeout=15):
        """Waits for ferryd to exit after the one SIGTERM (a second would cut the grace short)."""
        try:
            self.daemon.returncode = self.daemon.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure(f"gateway {self.n}: ferryd still runs {timeout}s after SIGTERM") from None
        return self.daemon.returncode

    def kill(self):
        self.daemon.kill()

    def request(self, cmd, args=None):
        return ok(self.daemon.request(cmd, args), f"gateway {self.n}: {cmd}")

    def announce(self):
        """{vip: row} of the `announce` command."""
        res = self.request("announce")
        check_eq((res.get("table"), res.get("protocol")), (TABLE, PROTO),
                 f"gateway {self.n}: announce table, protocol")
        return {v["vip"]: v for v in res["vips"]}

    def announced_metric(self, vip):
        return total(self.daemon, "ferry_announce_vip_announced", vip=vip)

    def health(self, service):
        svc = [s for s in self.request("services")["services"] if s["name"] == service]
        return {b["address"]: b.get("state") for b in svc[0]["backends"]}

    def await_health(self, service, state, timeout=HEALTH_TIMEOUT_S):
        try:
            wait_until(lambda: set(self.health(service).values()) == {state}, timeout,
                       f"gateway {self.n}: every backend of {service} {state}", interval=0.05)
        except TestFailure as e:
            raise TestFailure(f"{e}; now {self.health(service)}") from None

    def withdraw(self):
        """The unit's ExecStopPost: `ferryd --withdraw --config FILE` in the gateway's namespace."""
        started = time.monotonic()
        r = subprocess.run(["ip", "netns", "exec", self.lab.gw[self.n].name, FERRYD, "--withdraw",
                            "--config", self.config_path], capture_output=True, text=True, timeout=30)
        took = time.monotonic() - started
        check_eq(r.returncode, 0, f"ferryd --withdraw: {r.stdout} {r.stderr}")
        return took

    def cleanup(self):
        errors = []
        for d in self.runs:
            try:
                d.cleanup()
            except Exception as e:  # every run's log is checked, the first failure is raised
                errors.append(e)
        if errors:
            raise errors[0]



def open_tcp(lab, tcp, base):
    """Opens TCP_CONNS long-lived connections from client port `base` on; returns them and the
    gateway each one's proxy holds (read with ss on both)."""
    opened = tcp.open(TCP_CONNS, base)
    check_eq(set(opened.values()), {"ok"}, f"TCP connections open through both gateways: {opened}")
    tcp_path = {p: g for p, g in lab.tcp_gateways().items() if p in opened}
    check_eq(sorted(tcp_path), sorted(opened), "every TCP connection established on one gateway's proxy")
    return opened, tcp_path

def flows_by_backend(dump):
    """{flow port: set of backends that answered it} over the whole run so far (replies from
    another source than the VIP, not rewritten, are counted apart: loss())."""
    return {int(p): {backend_of(c) for c in set(s) - {".", "?"}} for p, s in dump["flows"].items()}


def window(before, after):
    """Per flow, the replies to the requests sent between two dumps (minus the last IN_FLIGHT
    ticks): {port: string of marks}."""
    a, b = before["seq"], after["seq"] - IN_FLIGHT
    check(b > a, f"window of {b - a} ticks")
    return {int(p): s[a:b] for p, s in after["flows"].items()}


def loss(before, after, gateway_of):
    """The loss between two dumps: per flow missing replies x the period, in ms; summary."""
    win = window(before, after)
    missing = {p: s.count(".") for p, s in win.items()}
    foreign = {p: s.count("?") for p, s in win.items() if "?" in s}
    lost_ms = {p: m * PERIOD_S * 1000 for p, m in missing.items()}
    by_gw = {}
    for p, ms in lost_ms.items():
        by_gw.setdefault(gateway_of.get(p), []).append(ms)
    return {
        "ticks": after["seq"] - IN_FLIGHT - before["seq"],
        "datagrams_sent": sum(len(s) for s in win.values()),
        "datagrams_lost": sum(missing.values()),
        "replies_not_rewritten": sum(foreign.values()),
        "flows_with_loss": sum(1 for m in missing.values() if m),
        "max_loss_ms_per_flow": max(lost_ms.values()),
        "mean_loss_ms_per_flow": round(sum(lost_ms.values()) / len(lost_ms), 1),
        "max_loss_ms_by_gateway": {str(g): max(v) for g, v in sorted(by_gw.items(), key=str)},
    }


def off_baseline(dump, baseline, since=0, until=None):
    """{flow: sorted backends} of the flows answered by another backend than their baseline in
    the requests numbered since..until (default: the whole run so far)."""
    wrong = {}
    for p, s in dump["flows"].items():
        got = {backend_of(c) for c in set(s[since:until]) - {".", "?"}}
        if got - {baseline[int(p)]}:
            wrong[int(p)] = sorted(got)
    return wrong


def check_same_backends(dump, baseline, what, since=0):
    """Every flow was answered by its baseline backend and by no other (from request `since` on)."""
    wrong = off_baseline(dump, baseline, since)
    check_eq(dict(list(wrong.items())[:8]), {}, f"{what}: flows answered by other backends than their "
             f"one-gateway baseline ({len(wrong)} of {len(dump['flows'])}; flow: backends)")


def ecmp_map(lab, proto, ports, dport, vip):
    return {p: lab.path_of(proto, p, dport, vip) for p in ports}


def fastpath_rx(gw):
    """Frames gateway gw's fast path took in on its router-side port."""
    return total(gw.daemon, "ferry_xsk_rx_packets_total", iface="ga")


def report(figures, w, key, value):
    figures[key] = value
    print(f"  FIGURE {key}: {json.dumps(value)}", flush=True)
    with open(w.file("fleet-figures.json"), "w") as f:
        json.dump(figures, f, indent=2)


def test_fleet_ecmp_failover_health_and_restart(workdir):
    lab = FleetLab(workdir)
    parts = Parts()
    figures = {"bgp_timers": "hold 3 s, keepalive 1 s, connect delay/retry 1 s, no BFD",
               "flows": FLOWS, "period_ms": PERIOD_S * 1000}
    gws = {}
    flows = tcp = None
    started = time.monotonic()
    try:
        lab.start_backends()
        lab.start_birds()
        lab.await_sessions()
        gws = {n: Gateway(lab, workdir, n) for n in (1, 2)}

        # --- One gateway only: the baseline of every flow's backend.
        g1, g2 = gws[1], gws[2]
        g1.start()
        g1.await_health("udp", "up")
        for vip in VIPS:
            lab.await_hops(vip, [1], what="gateway 1 alone")
        with parts.part("gateway 1 publishes both VIPs in table 100, proto 70"):
            check_eq(lab.announced_routes(1), sorted(VIPS), "gateway 1: ip route show table 100 proto 70")
            rows = g1.announce()
            check_eq({v: rows[v]["announced"] for v in VIPS}, {v: True for v in VIPS}, f"announce: {rows}")
            check_eq(g1.announced_metric(UDP_VIP), 1, "ferry_announce_vip_announced (UDP VIP)")
        flows = FlowClient(lab, workdir, FLOWS, FLOW_BASE, PERIOD_S)
        tcp = TcpClient(lab, workdir)
        wait_until(lambda: all(s.count(".") < len(s) for s in flows.dump()["flows"].values()), 10,
                   "a reply on every flow through gateway 1", interval=0.2)
        time.sleep(1.0)  # one second of replies through gateway 1 alone: the baseline
        base_dump = flows.dump()
        baseline = {}
        with parts.part("through gateway 1 alone: each flow on one backend, every backend used"):
            got = flows_by_backend(base_dump)
            split = {p: sorted(b) for p, b in got.items() if len(b) != 1}
            check_eq(split, {}, "flows not on exactly one backend through gateway 1")
            baseline = {p: next(iter(b)) for p, b in got.items()}
            share = {b: sum(1 for x in baseline.values() if x == b) for b in BACKENDS}
            print(f"  baseline (gateway 1 alone): flows by backend {share}", flush=True)
            check(all(share.values()), f"every backend has flows: {share}")

        # --- Both gateways: two next hops, the flows spread, no flow changes backend.
        g2.start()
        g2.await_health("udp", "up")
        for vip in VIPS:
            lab.await_hops(vip, [1, 2], what="both gateways")
        mark, tx0, rx0 = flows.dump(), lab.uplink_tx(), {n: fastpath_rx(g) for n, g in gws.items()}
        time.sleep(SETTLE_S)
        end, tx1, rx1 = flows.dump(), lab.uplink_tx(), {n: fastpath_rx(g) for n, g in gws.items()}
        udp_path = ecmp_map(lab, "udp", flows.ports, UDP_PORT, UDP_VIP)
        with parts.part("the router holds each VIP with two next hops"):
            for vip in VIPS:
                check_eq(lab.router_hops(vip), BOTH, f"router's next hops to {vip}")
        with parts.part("the flows spread over both gateways"):
            on = {n: sum(1 for g in udp_path.values() if g == n) for n in (1, 2)}
            sent = {n: tx1[n] - tx0[n] for n in (1, 2)}
            fp = {n: rx1[n] - rx0[n] for n in (1, 2)}
            report(figures, workdir, "spread", {"flows_by_gateway (router's hash)": on,
                                                "router_tx_packets_by_gateway": sent,
                                                "ferry_rx_on_ga": fp})
            for n in (1, 2):
                check(on[n] >= FLOWS // 4, f"gateway {n} carries at least a quarter of the flows: {on}")
                check(fp[n] > 0, f"gateway {n}'s fast path took frames: {fp}")
                # each gateway's share of the datagrams is its share of the flows (+-10 %)
                share = fp[n] / max(1, sum(fp.values()))
                check(abs(share - on[n] / FLOWS) < 0.1, f"gateway {n}: {share:.2f} of the frames, "
                      f"{on[n] / FLOWS:.2f} of the flows")
        with parts.part("every flow keeps its one-gateway backend over two gateways, no loss"):
            check_same_backends(end, baseline, "two gateways")
            figures["join_gateway_2"] = loss(mark, end, udp_path)
            print(f"  gateway 2 joins: {figures['join_gateway_2']}", flush=True)
            check_eq(figures["join_gateway_2"]["datagrams_lost"], 0, "datagrams lost after gateway 2 joined")

        # --- SIGTERM of gateway 1: withdrawn first, served through the grace, then stopped.
        opened, tcp_path = open_tcp(lab, tcp, 35000)
        mark = flows.dump()
        t0 = time.monotonic()
        g1.sigterm()
        withdrawn_s = {vip: lab.await_hops(vip, [2], what="SIGTERM of gateway 1") for vip in VIPS}
        with parts.part("SIGTERM: gateway 1's VIPs are withdrawn before it stops serving"):
            check(g1.daemon.proc.poll() is None, "ferryd still runs (withdraw_grace_ms) when the "
                  f"router has dropped it ({time.monotonic() - t0:.2f}s after SIGTERM)")
        rc = g1.wait_exit()
        stop_s = time.monotonic() - t0
        with parts.part("SIGTERM: ferryd serves through withdraw_grace_ms (1000) before it stops"):
            check(stop_s >= 0.95, f"ferryd exited {stop_s:.3f}s after SIGTERM")
        time.sleep(SETTLE_S)
        end = flows.dump()
        with parts.part("SIGTERM: ferryd exits 0 and leaves no route in table 100"):
            check_eq(rc, 0, "ferryd's exit status after SIGTERM")
            check_eq(lab.announced_routes(1), [], "gateway 1's table 100 after the stop")
        with parts.part("SIGTERM: every UDP flow continues on the same backend, loss bounded"):
            check_same_backends(end, baseline, "after SIGTERM of gateway 1")
            fig = loss(mark, end, udp_path)
            fig.update(withdrawn_after_s={v: round(s, 3) for v, s in withdrawn_s.items()},
                       ferryd_exited_after_s=round(stop_s, 3))
            report(figures, workdir, "sigterm", fig)
            check(fig["max_loss_ms_per_flow"] < MAX_SIGTERM_LOSS_MS,
                  f"loss per flow under {MAX_SIGTERM_LOSS_MS} ms (the grace outlasts convergence)")
        probe = tcp.probe()
        through1 = sorted(p for p, g in tcp_path.items() if g == 1)
        with parts.part("SIGTERM: TCP connections through gateway 1 lost, the others stay, new ones work"):
            lost = sorted(p for p, r in probe.items() if r != "ok")
            fresh = tcp.new(16, 36000)
            report(figures, workdir, "sigterm_tcp",
                   {"connections": TCP_CONNS, "through_gateway_1": len(through1), "lost": len(lost),
                    "how": sorted(set(probe[p] for p in lost)),
                    "new_connections_ok": sum(r == "ok" for r in fresh.values())})
            check_eq(lost, through1, "the TCP connections lost are exactly those through gateway 1")
            check_eq(set(fresh.values()), {"ok"}, f"new TCP connections through gateway 2: {fresh}")

        # Connections opened while gateway 2 is alone: a joining gateway takes over part of the
        # router's hash space, so some of them will then reach a host that has no socket for them.
        alone = tcp.open(TCP_CONNS, 36100)
        check_eq(set(alone.values()), {"ok"}, f"TCP connections open through gateway 2 alone: {alone}")

        # --- Restart: announced again, the flows spread again.
        restart_gateway(lab, gws, 1, flows, baseline, udp_path, parts, figures, workdir,
                        "restart_after_sigterm")
        probe = tcp.probe()
        with parts.part("restart: TCP connections the hash moves to the joining gateway lost, others stay"):
            open_before = sorted(alone) + [p for p in opened if p not in through1]
            lost = sorted(p for p in open_before if probe[p] != "ok")
            fresh = tcp.new(16, 36200)
            on = lab.tcp_gateways()
            report(figures, workdir, "restart_tcp", {"open_before": len(open_before), "lost": len(lost),
                                                     "how": sorted(set(probe[p] for p in lost)),
                                                     "still_open": len(open_before) - len(lost)})
            check_eq(sorted(p for p in open_before if probe[p] == "ok" and on.get(p) != 2), [],
                     "surviving connections all still on gateway 2")
            check(0 < len(lost) < len(open_before), f"some, not all, moved by the hash: {len(lost)}")
            check_eq(set(fresh.values()), {"ok"}, f"new TCP connections through both gateways: {fresh}")

        # --- SIGKILL of gateway 1, then the unit's ExecStopPost `ferryd --withdraw`.
        opened, tcp_path = open_tcp(lab, tcp, 37000)
        mark = flows.dump()
        t0 = time.monotonic()
        g1.kill()
        xdp_left = {ifname: xdp_attached(lab.gw[1], ifname) for ifname in ("ga", "gb")}
        with parts.part("SIGKILL: ferry's routes outlive the process until the withdraw"):
            check_eq(lab.announced_routes(1), sorted(VIPS), "gateway 1's table 100 after SIGKILL")
        withdraw_s = g1.withdraw()
        with parts.part("ferryd --withdraw: exits 0, deletes ferry's routes"):
            check_eq(lab.announced_routes(1), [], "gateway 1's table 100 after ferryd --withdraw")
        withdrawn_s = {vip: lab.await_hops(vip, [2], what="SIGKILL + withdraw of gateway 1") for vip in VIPS}
        converged_s = time.monotonic() - t0
        time.sleep(SETTLE_S)
        end = flows.dump()
        with parts.part("SIGKILL + withdraw: every UDP flow continues on the same backend, loss bounded"):
            check_same_backends(end, baseline, "after SIGKILL + withdraw of gateway 1")
            fig = loss(mark, end, udp_path)
            fig.update(withdraw_command_s=round(withdraw_s, 3),
                       router_converged_after_kill_s=round(converged_s, 3), xdp_attached_after_kill=xdp_left)
            report(figures, workdir, "sigkill_withdraw", fig)
            check(fig["max_loss_ms_per_flow"] < MAX_LOSS_MS, f"loss per flow under {MAX_LOSS_MS} ms")
        probe = tcp.probe()
        through1 = sorted(p for p, g in tcp_path.items() if g == 1)
        with parts.part("SIGKILL: TCP connections through gateway 1 lost, the others stay, new ones work"):
            lost = sorted(p for p in opened if probe[p] != "ok")
            fresh = tcp.new(16, 38000)
            report(figures, workdir, "sigkill_tcp",
                   {"connections": TCP_CONNS, "through_gateway_1": len(through1), "lost": len(lost),
                    "how": sorted(set(probe[p] for p in lost)),
                    "new_connections_ok": sum(r == "ok" for r in fresh.values())})
            check_eq(lost, through1, "the TCP connections lost are exactly those through gateway 1")
            check_eq(set(fresh.values()), {"ok"}, f"new TCP connections through gateway 2: {fresh}")

        restart_gateway(lab, gws, 1, flows, baseline, udp_path, parts, figures, workdir,
                        "restart_after_sigkill")

        before_health = flows.dump()
        with parts.part("SIGTERM, SIGKILL, restarts: every flow on its baseline backend throughout"):
            check_same_backends(before_health, baseline, "through SIGTERM, SIGKILL and both restarts")

        # --- Every UDP backend down in gateway 1's view: it withdraws the UDP VIP, gateway 2 keeps it.
        mark = before_health
        t0 = time.monotonic()
        lab.refuse_health(1)
        g1.await_health("udp", "down")
        down_s = time.monotonic() - t0
        withdrawn_s = lab.await_hops(UDP_VIP, [2], what="UDP backends down in gateway 1's view")
        conv = flows.dump()
        time.sleep(SETTLE_S)
        end = flows.dump()
        with parts.part("health: gateway 1 withdraws the UDP VIP (announce says why), keeps the TCP VIP"):
            rows = g1.announce()
            check_eq(rows[UDP_VIP]["announced"], False, f"gateway 1 announce row: {rows[UDP_VIP]}")
            check(rows[UDP_VIP].get("reason"), f"a reason for the withdrawal: {rows[UDP_VIP]}")
            check_eq(rows[TCP_VIP]["announced"], True, f"gateway 1 announce row: {rows[TCP_VIP]}")
            check_eq(g1.announced_metric(UDP_VIP), 0, "gateway 1: ferry_announce_vip_announced (UDP VIP)")
            check_eq(lab.announced_routes(1), [TCP_VIP], "gateway 1's table 100")
            print(f"  gateway 1 announce row for {UDP_VIP}: {rows[UDP_VIP]}", flush=True)
            r = ferryctl(g1.daemon, "--json", "announce")
            check_eq(r.returncode, 0, f"ferryctl announce: {r.stdout} {r.stderr}")
            cli = {v["vip"]: v for v in ok(json.loads(r.stdout), "ferryctl announce")["vips"]}
            check_eq((cli[UDP_VIP]["announced"], cli[TCP_VIP]["announced"]), (False, True),
                     "ferryctl --json announce on gateway 1")
            check_eq(lab.router_hops(TCP_VIP), BOTH, "router's next hops to the TCP VIP")
        with parts.part("health: gateway 2 keeps announcing the UDP VIP"):
            rows = g2.announce()
            check_eq({v: rows[v]["announced"] for v in VIPS}, {v: True for v in VIPS},
                     f"gateway 2 announce: {rows}")
            check_eq(g2.announced_metric(UDP_VIP), 1, "gateway 2: ferry_announce_vip_announced (UDP VIP)")
            check_eq(set(g2.health("udp").values()), {"up"}, "gateway 2's view of the UDP backends")
        with parts.part("health: flows through gateway 2 keep their backend, all do after the withdrawal"):
            # While gateway 1 still announces with some backends down in its view, it moves
            # their flows to its other backends (that is what a health-down backend means);
            # once it has withdrawn, every flow is on gateway 2 and its baseline backend.
            transient = off_baseline(conv, baseline, mark["seq"])
            check_eq({p: b for p, b in transient.items() if udp_path[p] != 1}, {},
                     "flows through gateway 2 answered by another backend than their baseline")
            check_same_backends(end, baseline, "after gateway 1 withdrew", since=conv["seq"] + IN_FLIGHT)
            fig = loss(mark, end, udp_path)
            fig.update(down_in_gateway_1_view_after_s=round(down_s, 3),
                       withdrawn_after_down_s=round(withdrawn_s, 3),
                       flows_moved_by_gateway_1_partial_view=len(transient),
                       gateway_1_flow_reassignments=total(g1.daemon, "ferry_xsk_flow_reassigned_total"))
            report(figures, workdir, "health_withdraw", fig)
            check(fig["max_loss_ms_per_flow"] < MAX_LOSS_MS, f"loss per flow under {MAX_LOSS_MS} ms")
        mark = flows.dump()
        lab.answer_health()
        g1.await_health("udp", "up")
        lab.await_hops(UDP_VIP, [1, 2], what="UDP backends up again in gateway 1's view")
        conv = flows.dump()
        time.sleep(SETTLE_S)
        end = flows.dump()
        with parts.part("health: announced again when the backends are up in gateway 1's view, no loss"):
            check_eq(g1.announce()[UDP_VIP]["announced"], True, "gateway 1 announce row of the UDP VIP")
            fig = loss(mark, end, udp_path)
            wrong = off_baseline(end, baseline, conv["seq"] + IN_FLIGHT)
            fig.update(flows_off_baseline_after_reannounce=len(wrong),
                       of_them_through_gateway_1=sum(1 for p in wrong if udp_path[p] == 1))
            report(figures, workdir, "health_recovered", fig)
            check_eq(fig["datagrams_lost"], 0, "datagrams lost when gateway 1 announces again")
        # Fails while a re-announcing gateway keeps the flow entries of its degraded view (see
        # the module's docstring): a product issue, reported, not worked around here.
        with parts.part("health: after the re-announcement every flow on its baseline backend"):
            check_same_backends(end, baseline, "after gateway 1 announced again",
                                since=conv["seq"] + IN_FLIGHT)

        report(figures, workdir, "client", flows.dump()["stats"])
        figures["run_s"] = round(time.monotonic() - started, 1)
        report(figures, workdir, "run_s", figures["run_s"])
        parts.done()
    finally:
        for c in (flows, tcp):
            if c is not None:
                c.close()
        try:
            for g in gws.values():
                g.cleanup()
        finally:
            lab.close()


def restart_gateway(lab, gws, n, flows, baseline, udp_path, parts, figures, w, key):
    """Starts ferryd in gateway n again: announced again, two next hops, the flows spread again,
    none changes backend."""
    g = gws[n]
    t0 = time.monotonic()
    g.start()
    for vip in VIPS:
        lab.await_hops(vip, [1, 2], what=f"{key}: gateway {n} announced again")
    announced_s = time.monotonic() - t0
    mark, rx0 = flows.dump(), {m: fastpath_rx(x) for m, x in gws.items()}
    time.sleep(SETTLE_S)
    end, rx1 = flows.dump(), {m: fastpath_rx(x) for m, x in gws.items()}
    with parts.part(f"{key}: announced again, two next hops, the flows spread again on the same backends"):
        check_eq(lab.announced_routes(n), sorted(VIPS), f"gateway {n}'s table 100")
        fp = {m: rx1[m] - rx0[m] for m in gws}
        fig = loss(mark, end, udp_path)
        fig.update(announced_after_start_s=round(announced_s, 3), ferry_rx_on_ga=fp)
        report(figures, w, key, fig)
        check(all(v > 0 for v in fp.values()), f"both gateways' fast paths take frames: {fp}")
        check_same_backends(end, baseline, key)
        check_eq(fig["datagrams_lost"], 0, f"{key}: datagrams lost")
    return fp
