"""Health checks that follow the data path (docs/health.md, "Encapsulating services"): in the
direct-server-return lab, ferryd checks the backends of its ipip and gue services at the VIP
inside each backend's tunnel, with every check type against real servers (http and tcp against
nginx, dns and udp against dnsmasq), IPv4 and IPv6. The gateway routes the VIPs to the client,
which does not forward: a check's packet that left bare would be lost, so a passing check went
through the tunnel. A backend that loses the VIP from its loopback, or its ferry-decap, is
marked down while its own address still answers; restored, it comes back up. Stopping ferryd
leaves no clsact qdisc or filter behind; a reload without checks removes the program and one with
them brings it back; an upgrade hands it to the successor, whose stop removes it."""
import json
import os

import pytest

from dsr_lab import (BACKENDS4, BACKENDS6, CLIENT4, CLIENT6, DNS, DsrLab, HTTP, NAMES, VIP4,
                     VIP4B, VIP6, dsr_config)
from harness import ControlClient, TestFailure, check, check_eq, ok, samples, total, wait_until
from test_systemd_unit import (UMEM, ConfinedFerryd, first_error, granted_memlock, service_uid,
                               unit_caps, unit_settings)
from upgrade_lab import Lineage, become_subreaper

INTERVAL_MS, TIMEOUT_MS, RISE, FALL = 300, 200, 2, 2
# Jitter, a check's timeout and a loaded 2-core machine, over the fall/rise streaks.
WITHIN_S = INTERVAL_MS / 1000 * max(RISE, FALL) * 1.1 + TIMEOUT_MS / 1000 + 3.0
# A DNS query for example.test A (id 0x1234, RD): dnsmasq answers it, as a udp check's send_hex.
DNS_QUERY_HEX = "123401000001000000000000076578616d706c650474657374000001" "0001"


def health(type_, **keys):
    return {"type": type_, "interval_ms": INTERVAL_MS, "timeout_ms": TIMEOUT_MS, "rise": RISE,
            "fall": FALL, **keys}


def backends(port, v6=False):
    return [f"[{a}]:{port}" if v6 else f"{a}:{port}" for a in (BACKENDS6 if v6 else BACKENDS4)]


# Every check type through both tunnels: (name, vip, port, protocols, forwarding, health).
SERVICES = [
    ("web", VIP4, HTTP, ["tcp"], "ipip", health("http", path="/name")),
    ("web2", VIP4B, HTTP, ["tcp"], "gue", health("http", path="/name")),
    ("tcp4", VIP4B, 81, ["tcp"], "ipip", health("tcp", port=HTTP)),
    ("web6", VIP6, HTTP, ["tcp"], "gue", health("tcp")),
    ("dns", VIP4, DNS, ["udp", "tcp"], "gue", health("dns", name="who.example.test",
                                                       rcodes=["NOERROR", "NXDOMAIN"])),
    ("dns6", VIP6, DNS, ["udp", "tcp"], "ipip", health("dns", name="who.example.test",
                                                        rcodes=["NOERROR", "NXDOMAIN"])),
    ("udp4", VIP4, 54, ["udp"], "gue", health("udp", send_hex=DNS_QUERY_HEX, port=DNS)),
    ("udp4i", VIP4, 55, ["udp"], "ipip", health("udp", send_hex=DNS_QUERY_HEX, port=DNS)),
]


def services_config():
    return [{"name": n, "vip": vip, "port": port, "protocols": protos, "forwarding": fwd,
             "backends": backends(port, ":" in vip), "health": h}
            for n, vip, port, protos, fwd, h in SERVICES]


def address_of(service, i):
    vip = next(v for n, v, *_ in SERVICES if n == service)
    port = next(p for n, _, p, *_ in SERVICES if n == service)
    return f"[{BACKENDS6[i]}]:{port}" if ":" in vip else f"{BACKENDS4[i]}:{port}"


@pytest.fixture(scope="module")
def lab_and_daemon():
    import harness
    w = harness.Workdir()
    lab = DsrLab(w)
    try:
        lab.start_servers()
        # The VIPs' route on the gateway: via a next hop that answers ARP/ND and does not forward
        # (the client here; an upstream router in production), out of g0 where the program sits.
        for vip in (VIP4, VIP4B):
            lab.gw.ip("route", "add", f"{vip}/32", "via", CLIENT4)
        lab.gw.ip("-6", "route", "add", f"{VIP6}/128", "via", CLIENT6)
        # Strict reverse-path filtering holds for answers from the VIPs: they arrive on g0, the
        # VIP route's interface (docs/health.md).
        lab.gw.run("sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1",
                   "net.ipv4.conf.g0.rp_filter=1")
        # A ferry gateway forwards with its fast path, not the kernel (whatever the host has).
        lab.gw.run("sysctl", "-qw", "net.ipv4.conf.all.forwarding=0",
                   "net.ipv6.conf.all.forwarding=0")
        d = harness.Daemon(w, w.write_config(dsr_config(w, services=services_config())),
                           netns=lab.gw.name)
        try:
            d.wait_ready()
            yield lab, d
        finally:
            d.cleanup()
    finally:
        lab.close()
        w.cleanup()


def rows(d):
    out = {}
    for s in ok(d.request("services"))["services"]:
        for b in s["backends"]:
            out[(s["name"], b["address"])] = b
    return out


def states(d):
    """Each (service, backend)'s state and last reason, and the tunnel program's counters: what a
    failure message shows."""
    lines = [f"{k[0]} {k[1]}: {r.get('state')} {r.get('last_result')} {r.get('last_reason')}"
             for k, r in sorted(rows(d).items())]
    counters = {labels["result"]: v
                for labels, v in samples(d, "ferry_health_tunnel_packets_total")}
    return "\n".join(lines + [f"tunnel program: {counters}"])


def settle(d, predicate, what):
    try:
        wait_until(predicate, WITHIN_S, what, interval=0.1)
    except TestFailure as e:
        raise TestFailure(f"{e}\n{states(d)}") from None


def passing(row):
    return row.get("state") == "up" and row.get("last_result") == "ok"


def wait_backend(d, i, state):
    """Every service's backend i reaches `state` (its last check ok when up); the others stay
    up and passing."""
    def reached():
        r = rows(d)
        for name, *_ in SERVICES:
            row = r[(name, address_of(name, i))]
            if (state == "up" and not passing(row)) or (state == "down" and
                                                         row.get("state") != "down"):
                return False
        return True
    settle(d, reached, f"backend {NAMES[i]} {state} in every service")
    r = rows(d)
    for name, *_ in SERVICES:
        for j in range(len(NAMES)):
            if j != i:
                check(passing(r[(name, address_of(name, j))]),
                      f"{name} backend {NAMES[j]} stays up: {r[(name, address_of(name, j))]}")
    return r


def own_address_answers(lab, i):
    """The backend's own address still serves: nginx over HTTP from the gateway."""
    r = lab.gw.run("curl", "-sS", "--max-time", "5", f"http://{BACKENDS4[i]}:{HTTP}/name")
    check_eq(r.stdout.strip(), NAMES[i], f"GET /name at {BACKENDS4[i]} itself")


def test_every_check_type_passes_through_both_tunnels(lab_and_daemon):
    lab, d = lab_and_daemon
    settle(d, lambda: all(passing(r) and r["checks"]["ok"] >= RISE for r in rows(d).values()),
           "every backend of every service passing its checks")
    r = rows(d)
    check_eq(len(r), len(SERVICES) * len(NAMES), "checked backends")
    marks = set()
    for key, row in sorted(r.items()):
        print(f"{key}: {row['check']} to {row['check_target']} mark {row['tunnel_mark']:#x}: "
              f"{row['last_reason']}", flush=True)
        name = key[0]
        vip, port, health_ = next((v, p, h) for n, v, p, _, _, h in SERVICES if n == name)
        want = f"[{vip}]" if ":" in vip else vip
        check_eq(row["check_target"], f"{want}:{health_.get('port', port)}",
                 f"{key}: the check goes to the VIP")
        check(row["tunnel_mark"] & 0xffff0000 == 0x66650000, f"{key}: a mark of ferry's range")
        marks.add((next(f for n, _, _, _, f, _ in SERVICES if n == name), key[1].rsplit(":", 1)[0],
                   row["tunnel_mark"]))
    # One mark per (forwarding, backend address): as many as there are such pairs.
    check_eq(len({m for *_, m in marks}), len({(f, a) for f, a, _ in marks}),
             f"one mark per tunnel: {sorted(marks)}")
    sent = {k: total(d, "ferry_health_tunnel_packets_total", result=k)
            for k in ("sent_ipip4", "sent_gue4", "sent_ipip6", "sent_gue6", "no_tunnel", "not_ip",
                      "gso", "adjust_failed", "no_route")}
    print(f"tunnel program: {sent}", flush=True)
    for k in ("sent_ipip4", "sent_gue4", "sent_ipip6", "sent_gue6"):
        check(sent[k] > 0, f"{k} carried checks: {sent}")
    for k in ("no_tunnel", "not_ip", "gso", "adjust_failed", "no_route"):
        check_eq(sent[k], 0, f"tunnel program drops {k}")
    # g0 forwards nothing (the fast path does): each packet left by g0's own route to its backend.
    routed = {labels["by"]: v for labels, v in samples(d, "ferry_health_tunnel_routed_packets_total")}
    check(routed["interface"] > 0 and routed["fib"] == 0, f"routed by g0's route: {routed}")
    # What the backends saw: nginx's requests came from the gateway to the VIP.
    with open(lab.w.file(f"{NAMES[0]}-nginx/access.log")) as f:
        health_lines = [line for line in f if "ferry-health" in line]
    check(health_lines, "nginx logged ferry's health checks")
    # The program is where the docs say: a clsact filter at g0's egress.
    out = lab.gw.run("tc", "filter", "show", "dev", "g0", "egress").stdout
    check("ferry_hc_encap" in out, f"the tunnel program at g0's egress:\n{out}")


def test_a_backend_that_lost_the_vip_goes_down_while_its_address_answers(lab_and_daemon):
    lab, d = lab_and_daemon
    test_every_check_type_passes_through_both_tunnels(lab_and_daemon)
    ns = lab.backends[0]
    vips = (f"{VIP4}/32", f"{VIP4B}/32", f"{VIP6}/128")
    for cidr in vips:
        ns.ip("addr", "del", cidr, "dev", "lo")
    try:
        r = wait_backend(d, 0, "down")
        for name, *_ in SERVICES:
            print(f"{name} {NAMES[0]}: {r[(name, address_of(name, 0))]['last_reason']}", flush=True)
        check_eq(total(d, "ferry_backend_up", service="web", backend=address_of("web", 0)), 0,
                 "ferry_backend_up of web's first backend")
        own_address_answers(lab, 0)
    finally:
        for cidr in vips:
            ns.ip("addr", "add", cidr, "dev", "lo", check=False)
    wait_backend(d, 0, "up")
    check_eq(total(d, "ferry_backend_up", service="web", backend=address_of("web", 0)), 1,
             "ferry_backend_up of web's first backend, back")


def test_a_backend_without_its_decapsulation_goes_down_and_comes_back(lab_and_daemon, ferryctl):
    lab, d = lab_and_daemon
    ns = lab.backends[1]
    lab.decap(ns, "detach", "b0")
    try:
        wait_backend(d, 1, "down")
        text = ferryctl.out(d, "services")
        check(f"{BACKENDS4[1]}:{HTTP}(down" in text, f"`ferryctl services` shows it down:\n{text}")
        own_address_answers(lab, 1)
    finally:
        lab.decap(ns, "attach", "b0", check_rc=False)
    wait_backend(d, 1, "up")


def test_without_a_route_to_the_vip_its_checks_fail_at_once(lab_and_daemon):
    lab, d = lab_and_daemon
    lab.gw.ip("route", "del", f"{VIP4B}/32")
    try:
        def unreachable():
            r = rows(d)
            return all(r[(n, address_of(n, i))]["state"] == "down"
                       for n, vip, *_ in SERVICES if vip == VIP4B for i in range(len(NAMES)))
        settle(d, unreachable, f"{VIP4B}'s services down without a route")
        row = rows(d)[("web2", address_of("web2", 0))]
        check_eq(row["last_reason"], "Network is unreachable", "why a check fails without a route")
    finally:
        lab.gw.ip("route", "add", f"{VIP4B}/32", "via", CLIENT4)
    settle(d, lambda: all(passing(r) for r in rows(d).values()), "every backend back up")


def test_with_forwarding_on_the_route_lookup_picks_the_interface(lab_and_daemon):
    """With forwarding on, bpf_fib_lookup answers and the program sends by its next hop (with
    it off, by the interface the packet is on): checks pass either way."""
    lab, d = lab_and_daemon
    knobs = ("net.ipv4.conf.all.forwarding", "net.ipv6.conf.all.forwarding")
    for knob in knobs:
        lab.gw.run("sysctl", "-qw", f"{knob}=1")
    try:
        before = {k: total(d, "ferry_health_tunnel_packets_total", result=k)
                  for k in ("sent_ipip4", "sent_gue4", "sent_ipip6", "sent_gue6")}
        settle(d, lambda: all(total(d, "ferry_health_tunnel_packets_total", result=k) > v + 5
                              for k, v in before.items()), "every tunnel carrying checks")
        fib = total(d, "ferry_health_tunnel_routed_packets_total", by="fib")
        settle(d, lambda: total(d, "ferry_health_tunnel_routed_packets_total", by="fib")
               > fib + 10, "checks sent by bpf_fib_lookup's next hop")
        bad = total(d, "ferry_health_checks_total", result="timeout")
        settle(d, lambda: all(passing(r) for r in rows(d).values()), "every backend passing")
        check_eq(total(d, "ferry_health_checks_total", result="timeout"), bad,
                 "checks timed out with forwarding on")
    finally:
        for knob in knobs:
            lab.gw.run("sysctl", "-qw", f"{knob}=0")


def clsact_state(lab):
    """(qdiscs, egress filters) of g0, as `tc` shows them."""
    qdiscs = lab.gw.run("tc", "qdisc", "show", "dev", "g0").stdout
    filters = lab.gw.run("tc", "filter", "show", "dev", "g0", "egress", check=False).stdout
    return qdiscs, filters


def check_no_clsact(lab, when):
    qdiscs, filters = clsact_state(lab)
    check("clsact" not in qdiscs, f"{when}: no clsact qdisc left on g0:\n{qdiscs}")
    check_eq(filters.strip(), "", f"{when}: filters left at g0's egress")


def test_a_reload_without_checks_removes_the_program_and_one_with_them_brings_it_back(
        lab_and_daemon):
    lab, d = lab_and_daemon
    services = services_config()
    for svc in services:
        del svc["health"]
    d.workdir.write_config(dsr_config(lab.w, services=services))
    ok(d.request("reload"), "reload without health")
    check_no_clsact(lab, "no encapsulating service checked")
    check(not samples(d, "ferry_health_tunnel_packets_total"), "no tunnel counters without it")
    d.workdir.write_config(dsr_config(lab.w, services=services_config()))
    ok(d.request("reload"), "reload with health again")
    check("ferry_hc_encap" in clsact_state(lab)[1], "the program back at g0's egress")
    # Checks removed made the backends unchecked; back, they are checked afresh and pass.
    settle(d, lambda: all(passing(r) and r["checks"]["ok"] >= 1 for r in rows(d).values()),
           "every backend passing again after the reload")


def test_stop_leaves_no_clsact_behind(lab_and_daemon):
    lab, d = lab_and_daemon
    check("clsact" in clsact_state(lab)[0], "ferryd created g0's clsact qdisc")
    check_eq(d.stop(), 0, "ferryd's exit status")
    check_no_clsact(lab, "after the stop")


def test_an_upgrade_hands_the_program_over_and_the_successor_removes_it(lab_and_daemon):
    """After the module's ferryd stopped: a new one, `ferryctl upgrade`, checks still pass through
    the successor's program; an upgrade to a config without checks removes what the predecessor
    left; the last stop removes the qdisc."""
    lab, _ = lab_and_daemon
    become_subreaper()
    w = lab.w
    lineage = Lineage(w, w.write_config(dsr_config(w, services=services_config()),
                                        name="upgrade.json"), lab.gw.name, name="ferryd-up")
    try:
        settle(lineage, lambda: all(passing(r) for r in rows(lineage).values()),
               "every backend passing before the upgrade")
        old = lineage.pid
        r = lineage.ferryctl("--json", "upgrade")
        check_eq(r.returncode, 0, f"ferryctl upgrade ({r.stdout} {r.stderr})")
        lineage.adopt(json.loads(r.stdout)["new_pid"])
        lineage.wait_gone(old, 15, "the old ferryd")
        qdiscs, filters = clsact_state(lab)
        check("clsact" in qdiscs and
              sum("ferry_hc_encap" in line for line in filters.splitlines()) == 1,
              f"one filter at g0's egress after the upgrade:\n{filters}")
        sent = total(lineage, "ferry_health_tunnel_packets_total")
        settle(lineage, lambda: total(lineage, "ferry_health_tunnel_packets_total") > sent + 10,
               "the successor's program carrying checks")
        settle(lineage, lambda: all(passing(r) for r in rows(lineage).values()),
               "every backend passing after the upgrade")
        # Upgraded to a config without checks, the successor removes what its predecessor left.
        services = services_config()
        for svc in services:
            del svc["health"]
        w.write_config(dsr_config(w, services=services), name="upgrade.json")
        old = lineage.pid
        r = lineage.ferryctl("--json", "upgrade")
        check_eq(r.returncode, 0, f"ferryctl upgrade without checks ({r.stdout} {r.stderr})")
        lineage.adopt(json.loads(r.stdout)["new_pid"])
        lineage.wait_gone(old, 15, "the second ferryd")
        check_no_clsact(lab, "after an upgrade to a config without checks")
        # And back: an upgrade to a config with them attaches again, and the stop removes it.
        w.write_config(dsr_config(w, services=services_config()), name="upgrade.json")
        ok(lineage.request("reload"), "reload with health")
        check("ferry_hc_encap" in clsact_state(lab)[1], "the program back after the reload")
    finally:
        lineage.cleanup()
    check_no_clsact(lab, "after the successor's stop")


def confined_config(w):
    """The module's config with the control socket in a directory the service uid owns, as
    RuntimeDirectory= provides."""
    uid, gid = service_uid()
    run_dir = w.file("run-confined")
    os.makedirs(run_dir, mode=0o750, exist_ok=True)
    os.chown(run_dir, uid, gid)
    cfg = dsr_config(w, services=services_config())
    cfg["control"] = {"socket": os.path.join(run_dir, "ferryd.sock"), "mode": "0660", "group": None}
    cfg["log"] = {"level": "info"}
    cfg["xdp"]["umem"] = UMEM  # within the memlock limit the unit may get here
    return w.write_config(cfg, name="confined.json"), cfg["control"]["socket"]


class Control:
    """request() over a control socket, for rows(), samples() and settle()."""

    def __init__(self, path):
        self.path = path

    def request(self, cmd, args=None):
        with ControlClient(self.path) as c:
            return c.request(cmd, args)


def test_the_units_capabilities_suffice_and_without_net_admin_ferryd_says_why(lab_and_daemon):
    """ferryd as the unit runs it (docs/operations.md, "Capabilities"): its ambient set loads and
    attaches the tunnel program and marks the checks' sockets; without CAP_NET_ADMIN it does not
    start, and its first error names the program."""
    lab, _ = lab_and_daemon
    _, ambient = unit_caps(unit_settings())
    cfg_path, sock = confined_config(lab.w)
    d = ConfinedFerryd(lab.w, lab, cfg_path, ambient, granted_memlock())
    try:
        check_eq(d.wait_ready_or_exit(), "ready", f"ferryd with the unit's capabilities:\n{d.log()}")
        control = Control(sock)
        settle(control, lambda: all(passing(r) for r in rows(control).values()),
               "every backend passing, checked by the confined ferryd")
        check_eq(d.stop(), 0, "the confined ferryd's exit status")
    finally:
        d.close()
    check_no_clsact(lab, "after the confined ferryd's stop")
    without = [c for c in ambient if c != "CAP_NET_ADMIN"]
    d = ConfinedFerryd(lab.w, lab, cfg_path, without, granted_memlock())
    try:
        state = d.wait_ready_or_exit()
        check(state != "ready", "ferryd without CAP_NET_ADMIN started")
        error = first_error(d.log())
        print(f"without CAP_NET_ADMIN: {error}", flush=True)
        check("health-check tunnel program" in error and "CAP_NET_ADMIN" in error,
              f"the first error names the program and the capability: {error}")
    finally:
        d.close()
    check_no_clsact(lab, "after the refused start")
