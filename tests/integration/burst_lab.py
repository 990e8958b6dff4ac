"""The first-burst lab (issue 23), shared by test_first_burst.py and tests/stress/first_burst.py:
client -- ferry gateway (two 2-queue veth ports) -- three UDP echo backends on one 2-queue veth,
IPv4 and IPv6, default offloads, VIPs on none of the gateway's subnets (the client reaches them by
its default route). A burst is N sockets sending one datagram each at once, then reading every
reply. Helpers put the gateway's neighbour entry of a client address into each state a new
client's entry can be in when the burst's replies arrive, and count what every kernel on the way
lost (so a lost reply is either explained there or is ferry's)."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

from fastpath_lab import TX_CSUM, by_label, total, udp_snmp
from harness import TestFailure, base_config, check_eq, wait_until
from netns import Netns, end_all, veth

PORT = 7070
VIP4, VIP6 = "10.10.9.9", "fd00:9::9"
CLIENT4, CLIENT6 = "10.10.1.2", "fd00:1::2"
GW_CLIENT4, GW_CLIENT6 = "10.10.1.1", "fd00:1::1"
GW_BACK4, GW_BACK6 = "10.10.2.1", "fd00:2::1"
BACKENDS4 = ["10.10.2.2", "10.10.2.3", "10.10.2.4"]
BACKENDS6 = ["fd00:2::2", "fd00:2::3", "fd00:2::4"]

# UDP echo on every backend address. The receive buffers are forced large (SO_RCVBUFFORCE, we are
# root): a burst of 600 must not overflow a socket while a loaded CPU keeps the server off it.
ECHO = r"""
import select, socket, sys
socks = []
for a in sys.argv[2:]:
    s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)
    s.bind((a, int(sys.argv[1]))); s.setblocking(False); socks.append(s)
print("ready", flush=True)
while True:
    for s in select.select(socks, [], [])[0]:
        while True:
            try:
                data, peer = s.recvfrom(2048)
            except BlockingIOError:
                break
            s.sendto(data, peer)
"""

# argv: source vip port count wait_s. `count` sockets bound to `source`, one datagram each sent as
# fast as the loop goes, then every reply read until all are in or `wait_s` passed since the last
# send (longer than ferry holds a frame). Prints {"sent", "answered", "bad", "send_ms", "last_ms"}.
BURST = r"""
import json, select, socket, sys, time
source, vip, port, count, wait_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
family = socket.AF_INET6 if ":" in vip else socket.AF_INET
socks = {}
for i in range(count):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((source, 0)); s.setblocking(False); socks[s.fileno()] = (i, s)
ep = select.epoll()
for fd in socks:
    ep.register(fd, select.EPOLLIN)
start = time.monotonic()
for fd, (i, s) in socks.items():
    s.sendto(b"burst %d %s" % (i, b"x" * 40), (vip, port))
sent_at = time.monotonic()
answered, bad, last = set(), 0, sent_at
while len(answered) < count and time.monotonic() - sent_at < wait_s:
    for fd, _ in ep.poll(0.05):
        i, s = socks[fd]
        try:
            data, src = s.recvfrom(2048)
        except BlockingIOError:
            continue
        if data.startswith(b"burst %d " % i) and src[0] == vip and src[1] == port:
            answered.add(i); last = time.monotonic()
        else:
            bad += 1
print(json.dumps({"sent": count, "answered": len(answered), "bad": bad,
                  "send_ms": round((sent_at - start) * 1000, 1),
                  "last_ms": round((last - start) * 1000, 1)}))
"""

# argv: ifname source_ip target_ip [ipv6]. One ARP request (IPv4) or neighbour solicitation (IPv6,
# with the source link-layer address option) from `source_ip` for `target_ip`, as the client's
# stack sends when it resolves the gateway: the gateway's kernel answers, and makes its own entry
# for `source_ip` STALE from it.
SOLICIT = r"""
import socket, struct, sys
ifname, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
mac = bytes.fromhex(open(f"/sys/class/net/{ifname}/address").read().strip().replace(":", ""))
if ":" not in dst:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0x0806))
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, socket.inet_aton(src), b"\0" * 6,
                      socket.inet_aton(dst))
    s.send(b"\xff" * 6 + mac + b"\x08\x06" + arp)
else:
    target = socket.inet_pton(socket.AF_INET6, dst)
    group = "ff02::1:ff" + target[13:].hex()[:2] + ":" + target[14:].hex()
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, socket.if_nametoindex(ifname))
    s.bind((src, 0))
    ns = struct.pack("!BBHI16sBB6s", 135, 0, 0, 0, target, 1, 1, mac)
    s.sendto(ns, (group, 0, 0, socket.if_nametoindex(ifname)))
"""

# Busy loops that keep every CPU of the machine contended while a burst runs (what the lab's 2
# cores see during a parallel build); argv: seconds.
HOG = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def sysctl(ns, key, value):
    ns.run("sysctl", "-qw", f"{key}={value}")


class BurstLab:
    """client (c0) -- (g0) gateway (g1) -- (b0) backends, two queues on every veth, IPv4 and IPv6
    (no DAD), the veths' default offloads, the VIPs off every subnet. `extra_clients` are further
    client addresses (IPv4 and IPv6 strings) on c0, each a 'new client' the gateway never saw."""

    def __init__(self, tag="fb", extra_clients=()):
        self.spaces = []
        self.procs = []
        self.groups = []  # processes started in a session of their own: killed as a group
        self.files = []
        try:
            for t in "cgb":
                self.spaces.append(Netns(f"{tag}{t}", ipv6=True))
            self.client, self.gw, self.back = self.spaces
            veth(self.client, "c0", self.gw, "g0", queues=2)
            veth(self.gw, "g1", self.back, "b0", queues=2)
            self.client.add_addresses("c0", f"{CLIENT4}/24", f"{CLIENT6}/64",
                                      *(f"{a}/{64 if ':' in a else 24}" for a in extra_clients))
            self.gw.add_addresses("g0", f"{GW_CLIENT4}/24", f"{GW_CLIENT6}/64")
            self.gw.add_addresses("g1", f"{GW_BACK4}/24", f"{GW_BACK6}/64")
            self.back.add_addresses("b0", *(f"{a}/24" for a in BACKENDS4),
                                    *(f"{a}/64" for a in BACKENDS6))
            self.client.ip("route", "add", "default", "via", GW_CLIENT4)
            self.client.ip("-6", "route", "add", "default", "via", GW_CLIENT6)
            self.back.ip("route", "add", "default", "via", GW_BACK4)
            self.back.ip("-6", "route", "add", "default", "via", GW_BACK6)
            sysctl(self.gw, "net.ipv4.ip_forward", 1)
            for ns, ifname in ((self.client, "c0"), (self.back, "b0")):
                state = ns.run(sys.executable, "-c", TX_CSUM, ifname).stdout.strip()
                check_eq(state, "1", f"transmit checksum offload of {ifname} (the veth default)")
            self.mac = {name: self.mac_of(ns, name) for ns, name in
                        ((self.client, "c0"), (self.gw, "g0"), (self.gw, "g1"), (self.back, "b0"))}
        except Exception:
            self.close()
            raise

    @staticmethod
    def mac_of(ns, ifname):
        return json.loads(ns.ip("-j", "link", "show", "dev", ifname).stdout)[0]["address"]

    def start_echo(self, log):
        p = subprocess.Popen(["ip", "netns", "exec", self.back.name, sys.executable, "-u", "-c", ECHO,
                              str(PORT), *BACKENDS4, *BACKENDS6],
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.procs.append(p)
        wait_until(lambda: "ready" in open(log).read(), 10, "echo servers")

    def burst(self, source, count, wait_s=4.0):
        vip = VIP6 if ":" in source else VIP4
        r = self.client.run("timeout", "60", sys.executable, "-c", BURST, source, vip, str(PORT),
                            str(count), str(wait_s), check=False)
        check_eq(r.returncode, 0, f"burst from {source}: {r.stdout} {r.stderr}")
        return json.loads(r.stdout)

    def solicit(self, source):
        """The client's ARP request / neighbour solicitation for the gateway, sent from `source`."""
        gw = GW_CLIENT6 if ":" in source else GW_CLIENT4
        self.client.run(sys.executable, "-c", SOLICIT, "c0", source, gw)

    def gateway_neighbour(self, address):
        """(state list, MAC) of the gateway's entry for `address` on g0; ([], None) when none."""
        out = json.loads(self.gw.ip("-j", "neigh", "show", "to", address, "dev", "g0").stdout or "[]")
        if not out:
            return [], None
        return out[0].get("state", []), out[0].get("lladdr")

    def lost_outside_ferry(self):
        """What the kernels on the way counted as lost: the endpoints' UDP sockets without room, the
        veths' drops (a full peer ring), the client's own unresolved-neighbour queue."""
        out = {}
        for side, ns in (("client", self.client), ("backends", self.back)):
            v4 = udp_snmp(ns)["RcvbufErrors"]
            snmp6 = dict(l.split()[:2] for l in ns.run("cat", "/proc/net/snmp6").stdout.splitlines()
                         if l.strip())
            out[f"{side} RcvbufErrors"] = v4 + int(snmp6["Udp6RcvbufErrors"])
        for ns in (self.client, self.gw, self.back):
            for link in json.loads(ns.ip("-s", "-j", "link", "show", "type", "veth").stdout):
                st = link["stats64"]
                out[f"veth {link['ifname']}"] = st["tx"]["dropped"] + st["rx"]["dropped"]
        return out

    def close(self):
        for p in self.groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        end_all(self.procs, self.spaces)
        for path in self.files:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def burst_config(w, log_level="info"):
    cfg = base_config(w, xdp={
        "interfaces": [{"name": "g0"}, {"name": "g1"}],
        "umem": {"frames": 4096, "frame_bytes": 4096},
        "rings": {"fill": 512, "completion": 512, "rx": 512, "tx": 512},
    }, services=[
        {"name": "echo4", "vip": VIP4, "port": PORT, "protocols": ["udp"],
         "backends": [f"{b}:{PORT}" for b in BACKENDS4]},
        {"name": "echo6", "vip": VIP6, "port": PORT, "protocols": ["udp"],
         "backends": [f"[{b}]:{PORT}" for b in BACKENDS6]},
    ])
    cfg["log"] = {"level": log_level}
    return cfg


def neighbour_figures(d):
    """ferry's hold figures: frames held, released, and every drop by reason."""
    out = {"held": total(d, "ferry_xsk_neighbour_held_total"),
           "released": total(d, "ferry_xsk_neighbour_released_total")}
    out.update({f"drop:{k}": v for k, v in by_label(d, "ferry_xsk_drops_total", "reason").items()})
    resyncs = total(d, "ferry_xsk_netlink_events_total", kind="resync")
    if resyncs:
        out["netlink_resync"] = resyncs
    return out


def diff(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(after) | set(before))
            if after.get(k, 0) - before.get(k, 0)}


class NeighbourChurn:
    """A process in the gateway's namespace that rewrites `entries` neighbour entries of a veth
    that is not a fast-path port in a loop, for at most `seconds`: a flood of RTM_NEWNEIGH /
    RTM_DELNEIGH notifications on the group ferry follows, which can overrun its socket (ENOBUFS)
    and make it re-read the table while notifications keep coming."""

    def __init__(self, lab, entries=2000, seconds=600):
        lab.gw.ip("link", "add", "churn0", "type", "veth", "peer", "name", "churn1")
        for ifname in ("churn0", "churn1"):
            lab.gw.ip("link", "set", ifname, "up")
        lab.gw.ip("addr", "add", "10.99.0.1/16", "dev", "churn0")
        batch = "".join(f"neigh replace 10.99.{i // 250}.{i % 250 + 2} lladdr 02:00:00:00:{i // 250:02x}:"
                        f"{i % 250:02x} dev churn0\n" for i in range(entries))
        batch += "".join(f"neigh del 10.99.{i // 250}.{i % 250 + 2} dev churn0\n" for i in range(entries))
        path = f"/tmp/churn-{lab.gw.name}.batch"
        with open(path, "w") as f:
            f.write(batch)
        # A session of its own: the lab kills the whole process group (the shell and its ip).
        self.proc = subprocess.Popen(["ip", "netns", "exec", lab.gw.name, "timeout", str(seconds),
                                      "sh", "-c", f"while :; do ip -batch {path}; done"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        lab.groups.append(self.proc)
        lab.files.append(path)


class Hogs:
    """`count` busy loops (one per CPU by default) for at most `seconds`, killed on exit."""

    def __init__(self, count=None, seconds=600):
        self.procs = [subprocess.Popen([sys.executable, "-c", HOG, str(seconds)])
                      for _ in range(count if count is not None else os.cpu_count())]

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()




# The states the gateway's neighbour entry of a new client address can be in when the burst's
# replies come back from the backends, and how the lab puts it there. Each function takes (lab,
# address), returns once the gateway's kernel shows the state (polled: only `ip neigh` says so),
# and leaves the client answering ARP / ND again; the burst then comes at once.

def family_of(address):
    return "-6" if ":" in address else "-4"


def solicited_node(address):
    """ff02::1:ffXX:XXXX of an IPv6 address."""
    import ipaddress
    low = ipaddress.IPv6Address(address).packed[13:]
    return str(ipaddress.IPv6Address(bytes.fromhex("ff02" + "00" * 9 + "01ff") + low))


class Deaf:
    """While inside, the client ignores the gateway's ARP requests / neighbour solicitations for
    `address` (nftables in the client's namespace), so a resolution by the gateway gets no answer."""

    def __init__(self, lab, address):
        self.lab, self.address = lab, address

    def __enter__(self):
        if ":" in self.address:
            self.table = ("ip6", "deaf")
            match = ["ip6", "daddr", f"{{ {self.address}, {solicited_node(self.address)} }}",
                     "icmpv6", "type", "nd-neighbor-solicit"]
        else:
            self.table = ("arp", "deaf")
            match = ["arp", "operation", "request", "arp", "daddr", "ip", self.address]
        self.lab.client.run("nft", "add", "table", *self.table)
        self.lab.client.run("nft", "add", "chain", *self.table, "input",
                            "{ type filter hook input priority 0; }")
        self.lab.client.run("nft", "add", "rule", *self.table, "input", *match, "drop")
        return self

    def __exit__(self, *exc):
        self.lab.client.run("nft", "delete", "table", *self.table)


def neighbour_sysctl(lab, address, knob, value):
    """A per-interface neighbour knob of the gateway's g0 (delay_first_probe_time in s,
    retrans_time_ms): only to reach a state sooner, restored by the caller."""
    fam = "ipv6" if ":" in address else "ipv4"
    sysctl(lab.gw, f"net.{fam}.neigh.g0.{knob}", value)


def await_state(lab, address, states, what, timeout=10):
    wait_until(lambda: any(s in lab.gateway_neighbour(address)[0] for s in states), timeout,
               f"the gateway's entry for {address} {what} (now {lab.gateway_neighbour(address)})")


def gateway_pings(lab, address):
    """The gateway's own stack sends one echo request to `address` (and so resolves it, or uses its
    entry): the kernel's neighbour state machine runs as for any packet of its own."""
    p = subprocess.Popen(["ip", "netns", "exec", lab.gw.name, "ping", family_of(address), "-c1",
                          "-W3", "-I", "g0", address], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    lab.procs.append(p)
    return p


def gateway_uses(lab, address, states, what):
    """The gateway's own stack sends to `address`, whose entry is STALE, until the kernel shows
    one of `states` (DELAY, then PROBE): a ping that a loaded machine delays past the wait is sent
    again, one a second."""
    deadline = time.monotonic() + 10
    while True:
        gateway_pings(lab, address)
        try:
            return await_state(lab, address, states, what, timeout=1)
        except TestFailure:
            if time.monotonic() > deadline:
                raise


def client_knows_gateway(lab, address):
    """The client host has resolved the gateway already (its main address asked), so a burst from
    `address` sends no ARP / NS first."""
    main, gw = (CLIENT6, GW_CLIENT6) if ":" in address else (CLIENT4, GW_CLIENT4)
    lab.client.run("ping", family_of(address), "-c1", "-W2", "-I", main, gw)
    states = json.loads(lab.client.ip("-j", "neigh", "show", "to", gw, "dev", "c0").stdout)
    check_eq(bool(states and states[0].get("lladdr")), True, f"the client knows {gw}")


def solicit_stale(lab, address):
    """The client's ARP request / NS from `address` makes the gateway's entry STALE; an IPv6
    gateway then sends its solicited advertisement through that entry, which moves it to DELAY at
    once (the kernel's own use of a STALE entry)."""
    lab.solicit(address)
    await_state(lab, address, ["STALE", "DELAY"] if ":" in address else ["STALE"],
                "STALE from the client's ARP request / NS")


def state_first_contact(lab, address):
    """Nothing yet, and the client host has never resolved the gateway: the burst's first datagram
    makes it ask, so the gateway's entry is created STALE from that ARP request / NS while the
    burst is under way (the case of issue 23). Only for a client host's first packet."""
    gw = GW_CLIENT6 if ":" in address else GW_CLIENT4
    check_eq(lab.client.ip("neigh", "show", "to", gw, "dev", "c0").stdout.strip(), "",
             "the client host has never resolved the gateway")


def state_none(lab, address):
    """No entry: a new address of a client host that knows the gateway already."""
    client_knows_gateway(lab, address)
    check_eq(lab.gateway_neighbour(address), ([], None), f"the gateway knows nothing of {address}")


def state_stale_from_solicitation(lab, address):
    """STALE, created by the client's own ARP request / NS from `address` (which nothing in the
    gateway's stack then uses or probes)."""
    client_knows_gateway(lab, address)
    solicit_stale(lab, address)


def state_stale_set_by_admin(lab, address):
    """STALE with the right MAC, written by hand (`ip neigh replace ... nud stale`)."""
    client_knows_gateway(lab, address)
    lab.gw.ip("neigh", "replace", address, "lladdr", lab.mac["c0"], "dev", "g0", "nud", "stale")
    await_state(lab, address, ["STALE"], "STALE as set")


def state_incomplete(lab, address):
    """INCOMPLETE: the gateway's own stack is resolving the address, its first solicitation went
    unanswered; the client answers the next one (up to retrans_time, 1 s, later)."""
    client_knows_gateway(lab, address)
    with Deaf(lab, address):
        gateway_pings(lab, address)
        await_state(lab, address, ["INCOMPLETE"], "INCOMPLETE")


def state_incomplete_set_by_admin(lab, address):
    """INCOMPLETE written by hand (`ip neigh replace ... nud incomplete`, or a program sending
    RTM_NEWNEIGH with NUD_INCOMPLETE): the kernel keeps no timer on it and never solicits, and
    NTF_USE leaves an INCOMPLETE entry as it is."""
    client_knows_gateway(lab, address)
    lab.gw.ip("neigh", "replace", address, "dev", "g0", "nud", "incomplete")
    await_state(lab, address, ["INCOMPLETE"], "INCOMPLETE as set")


def state_delay(lab, address):
    """DELAY: STALE from the client's solicitation, then used by the gateway's own stack."""
    client_knows_gateway(lab, address)
    solicit_stale(lab, address)
    gateway_uses(lab, address, ["DELAY"], "DELAY")


def state_probe(lab, address):
    """PROBE: DELAY ran out without confirmation, the gateway probes by unicast (unanswered so
    far; delay_first_probe_time 1 s instead of 5 to get there sooner)."""
    client_knows_gateway(lab, address)
    neighbour_sysctl(lab, address, "delay_first_probe_time", 1)
    try:
        with Deaf(lab, address):
            solicit_stale(lab, address)
            gateway_uses(lab, address, ["DELAY", "PROBE"], "DELAY")
            await_state(lab, address, ["PROBE"], "PROBE")
    finally:
        neighbour_sysctl(lab, address, "delay_first_probe_time", 5)


def state_failed(lab, address):
    """FAILED: the gateway's resolution went unanswered to the end (retrans_time 100 ms instead of
    1 s to get there sooner, restored before the burst); the client answers again, so it must be
    learned anew."""
    client_knows_gateway(lab, address)
    neighbour_sysctl(lab, address, "retrans_time_ms", 100)
    try:
        with Deaf(lab, address):
            gateway_pings(lab, address)
            await_state(lab, address, ["FAILED"], "FAILED")
    finally:
        neighbour_sysctl(lab, address, "retrans_time_ms", 1000)


STATES = [state_first_contact, state_none, state_stale_from_solicitation, state_stale_set_by_admin,
          state_incomplete, state_incomplete_set_by_admin, state_delay, state_probe, state_failed]
