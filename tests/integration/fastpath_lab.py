"""The fast path's netns lab, shared by the test_fastpath*.py tests: client -- ferry gateway (two
2-queue veth ports) -- backends (3 UDP echo addresses and a routed sink; IPv6 ones too when a test
asks), the senders' veths with veth's default offloads unless a test asks for the full-checksum
variant, the helper scripts that run inside the namespaces, and readers for ferryd's fast-path
metrics and the receivers' UDP counters."""
import contextlib
import ctypes
import json
import os
import socket
import struct
import subprocess
import sys

from harness import base_config, check, check_eq, ok, wait_until
from harness import by_label, samples, total  # noqa: F401 (its tests import them from here)
from netns import Netns, end_all, veth

VIP = "10.10.100.10"
PORT = 5300
CLIENT = "10.10.1.2"
GATEWAY_CLIENT_SIDE = "10.10.1.1"
GATEWAY_BACKEND_SIDE = "10.10.2.1"
BACKENDS = ["10.10.2.2", "10.10.2.3", "10.10.2.4"]
SINK = "10.10.3.5"
SINK_PORT = 9999
ROUTED_PREFIX = "10.10.3.0/24"
# Lab(ipv6=True): the same lab in IPv6 as well, with an echo service of its own.
VIP6 = "fd10:100::10"
CLIENT6 = "fd10:1::2"
GATEWAY6_CLIENT_SIDE = "fd10:1::1"
GATEWAY6_BACKEND_SIDE = "fd10:2::1"
BACKENDS6 = ["fd10:2::2", "fd10:2::3", "fd10:2::4"]

# Transmit checksum offload of one interface (SIOCETHTOOL, so the test needs no ethtool binary):
# `TX_CSUM ifname off` turns it off (ETHTOOL_STXCSUM) first; either way it prints the state after
# (ETHTOOL_GTXCSUM, 1 = on). A veth keeps it on by default: UDP its local stack sends carries only
# the pseudo-header sum (CHECKSUM_PARTIAL), which is what containers, pods, VMs and local backends
# send. Lab(tx_checksum_offload=False) turns it off on the senders, so their frames carry full
# checksums, as frames from a real NIC do.
TX_CSUM = r"""
import ctypes, fcntl, socket, struct, sys
def ethtool(cmd, value=0):
    buf = ctypes.create_string_buffer(struct.pack("II", cmd, value))
    ifr = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(buf)).ljust(40, b"\0")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), 0x8946, ifr)
    return struct.unpack("II", buf.raw[:8])[1]
if sys.argv[2:] == ["off"]:
    ethtool(0x17, 0)
print(ethtool(0x16))
"""


def udp_snmp(ns):
    """{field: value} of the Udp line of /proc/net/snmp in namespace `ns` (InDatagrams,
    InCsumErrors, RcvbufErrors...)."""
    lines = [l.split() for l in ns.run("cat", "/proc/net/snmp").stdout.splitlines()
             if l.startswith("Udp:")]
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:])}


def partial_udp_checksum(src, dst, udp_length):
    """What a local stack's UDP socket leaves in the checksum field of a datagram it sends over a
    veth with transmit checksum offload on (CHECKSUM_PARTIAL): the folded, not complemented,
    ones'-complement sum of the IPv4 pseudo header. It does not depend on the ports or the
    payload, so a generator (trafgen's udp(csum=...)) can write the same constant."""
    words = struct.unpack("!4H", socket.inet_aton(src) + socket.inet_aton(dst))
    total = sum(words) + socket.IPPROTO_UDP + udp_length
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


# Echo servers on every backend address; logs "backend client_ip client_port payload-head".
# Datagrams starting with "blast" are only received: a flood is counted at the interface, and
# echoing it would double the load on a 2-CPU machine.
ECHO = r"""
import select, socket, sys
socks = []
for a in sys.argv[2:]:
    s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((a, int(sys.argv[1])))
    socks.append(s)
print("ready", flush=True)
while True:
    r, _, _ = select.select(socks, [], [], 0.05)
    if not r:
        sys.stdout.flush()
    for s in r:
        data, peer = s.recvfrom(65535)
        if data.startswith(b"blast"):
            continue
        print(s.getsockname()[0], peer[0], peer[1], data[:24].split(b" ")[0].decode(errors="replace"))
        s.sendto(data, peer)
"""

# One request/reply per flow and round; a lost one is sent again after 0.3 s (counted: ferry holds
# frames for a next hop it is resolving, so in a healthy lab none is).
CLIENT_SCRIPT = r"""
import json, socket, sys
vip, port, flows, rounds, base, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
res = {"ok": 0, "bad": 0, "lost": 0, "retries": 0}
socks = []
for i in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[7], base + i)); s.settimeout(0.3); socks.append(s)
for r in range(rounds):
    for i, s in enumerate(socks):
        payload = (f"{tag}-{i}-{r} ".encode() + bytes(range(256)) * 3)[: 40 + (i * 97 + r * 31) % 700]
        for attempt in range(8):
            s.sendto(payload, (vip, port))
            try:
                while True:
                    data, src = s.recvfrom(65535)
                    if data.startswith(f"{tag}-{i}-{r} ".encode()):
                        break
                if data == payload and src == (vip, port): res["ok"] += 1
                else: res["bad"] += 1
                break
            except socket.timeout:
                res["retries"] += 1
        else:
            res["lost"] += 1
print(json.dumps(res))
"""

# Receives routed datagrams, prints "ttl length head" for each (IP_RECVTTL = 12, IP_TTL = 2).
SINK_SCRIPT = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 12, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.settimeout(float(sys.argv[3]))
print("ready", flush=True)
try:
    while True:
        data, anc, _, peer = s.recvmsg(65535, 64)
        ttl = [struct.unpack("i", d)[0] for l, t, d in anc if t == 2]
        print(ttl[0] if ttl else -1, len(data), data[:12].decode(errors="replace"), flush=True)
except socket.timeout:
    pass
"""

_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def inside(ns):
    """Runs the body with this thread in namespace `ns`: sockets created there stay in it."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns.name}", os.O_RDONLY)
    try:
        if _libc.setns(target, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns.name}")
        try:
            yield
        finally:
            if _libc.setns(home, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back home")
    finally:
        os.close(target)
        os.close(home)


class Lab:
    """client (c0) -- (g0) gateway (g1) -- (b0) backends, two queues on every veth.

    mtu: of c0 and g0 (for frames larger than a UMEM frame); static_neighbours: every neighbour
    entry PERMANENT, so no ARP crosses the lab and the XDP `pass` counter moves only with the
    frames a test sends; tx_checksum_offload: True (the default, and what real traffic is) leaves
    the senders' veths (c0, b0) as veth comes, so their local stacks send UDP with only the
    pseudo-header sum in the checksum field (CHECKSUM_PARTIAL); False turns the offload off on
    them, the variant that stands for traffic from a real NIC (full checksums); ipv6: the *6
    addresses and routes as well, IPv6 on without duplicate address detection or router
    solicitations (neighbour discovery and MLD still cross the lab unless static_neighbours)."""

    def __init__(self, mtu=None, static_neighbours=False, tx_checksum_offload=True, ipv6=False):
        self.tx_checksum_offload = tx_checksum_offload
        self.ipv6 = ipv6
        self.spaces = []
        self.procs = []
        self.echo_log = None
        try:
            self.client, self.gw, self.back = (self.space(t) for t in ("fpc", "fpg", "fpb"))
            veth(self.client, "c0", self.gw, "g0", queues=2)
            veth(self.gw, "g1", self.back, "b0", queues=2)
            if mtu:
                self.client.ip("link", "set", "c0", "mtu", str(mtu))
                self.gw.ip("link", "set", "g0", "mtu", str(mtu))
            self.client.ip("addr", "add", f"{CLIENT}/24", "dev", "c0")
            self.gw.ip("addr", "add", f"{GATEWAY_CLIENT_SIDE}/24", "dev", "g0")
            self.gw.ip("addr", "add", f"{GATEWAY_BACKEND_SIDE}/24", "dev", "g1")
            for a in BACKENDS:
                self.back.ip("addr", "add", f"{a}/24", "dev", "b0")
            self.back.ip("addr", "add", f"{SINK}/32", "dev", "b0")
            self.client.ip("route", "add", "default", "via", GATEWAY_CLIENT_SIDE)
            self.back.ip("route", "add", "default", "via", GATEWAY_BACKEND_SIDE, "src", BACKENDS[0])
            # The routed prefix leaves g1 through a gateway: ferry must use the kernel's next hop.
            self.gw.ip("route", "add", ROUTED_PREFIX, "via", BACKENDS[0], "dev", "g1")
            self.gw.run("sysctl", "-qw", "net.ipv4.ip_forward=1")
            if ipv6:
                self.add_ipv6()
            self.sender_tx_csum = {"c0": self.set_sender_offload(self.client, "c0"),
                                   "b0": self.set_sender_offload(self.back, "b0")}
            self.mac = {"c0": self.mac_of(self.client, "c0"), "g0": self.mac_of(self.gw, "g0"),
                        "g1": self.mac_of(self.gw, "g1"), "b0": self.mac_of(self.back, "b0")}
            if static_neighbours:
                self.pin_neighbours()
        except Exception:
            self.close()
            raise

    def space(self, tag):
        ns = Netns(tag, ipv6=self.ipv6)
        self.spaces.append(ns)
        if self.ipv6:  # the veths made after this send none
            ns.run("sysctl", "-qw", "net.ipv6.conf.default.router_solicitations=0")
        return ns

    def add_ipv6(self):
        self.client.ip("addr", "add", f"{CLIENT6}/64", "dev", "c0", "nodad")
        self.gw.ip("addr", "add", f"{GATEWAY6_CLIENT_SIDE}/64", "dev", "g0", "nodad")
        self.gw.ip("addr", "add", f"{GATEWAY6_BACKEND_SIDE}/64", "dev", "g1", "nodad")
        for a in BACKENDS6:
            self.back.ip("addr", "add", f"{a}/64", "dev", "b0", "nodad")
        self.client.ip("-6", "route", "add", "default", "via", GATEWAY6_CLIENT_SIDE)
        self.back.ip("-6", "route", "add", "default", "via", GATEWAY6_BACKEND_SIDE, "src",
                     BACKENDS6[0])
        self.gw.run("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")

    def set_sender_offload(self, ns, ifname):
        """Applies the lab's tx_checksum_offload to a sender veth (also one re-created by a test);
        returns the interface's transmit checksum offload state after it (1 = on)."""
        args = [] if self.tx_checksum_offload else ["off"]
        state = int(ns.run(sys.executable, "-c", TX_CSUM, ifname, *args).stdout)
        check_eq(state, int(self.tx_checksum_offload), f"{ifname}: transmit checksum offload")
        return state

    def udp_stats(self):
        """{"client": {field: value}, "backends": {...}}: udp_snmp() of the client's and the
        backends' namespaces."""
        return {"client": udp_snmp(self.client), "backends": udp_snmp(self.back)}

    def udp_csum_errors(self):
        """Udp InCsumErrors of the client's and the backends' namespaces: a datagram ferry
        forwarded with a wrong checksum is dropped by the receiving stack and counted there,
        never reaching a socket."""
        return {who: stats["InCsumErrors"] for who, stats in self.udp_stats().items()}

    @staticmethod
    def mac_of(ns, ifname):
        link = json.loads(ns.ip("-j", "link", "show", "dev", ifname).stdout)
        return link[0]["address"]

    def pin_neighbours(self):
        def pin(ns, ip, mac, dev):
            ns.ip("neigh", "replace", ip, "lladdr", mac, "dev", dev, "nud", "permanent")
        pin(self.client, GATEWAY_CLIENT_SIDE, self.mac["g0"], "c0")
        pin(self.gw, CLIENT, self.mac["c0"], "g0")
        for a in BACKENDS:
            pin(self.gw, a, self.mac["b0"], "g1")
        pin(self.back, GATEWAY_BACKEND_SIDE, self.mac["g1"], "b0")
        if self.ipv6:
            pin(self.client, GATEWAY6_CLIENT_SIDE, self.mac["g0"], "c0")
            pin(self.gw, CLIENT6, self.mac["c0"], "g0")
            for a in BACKENDS6:
                pin(self.gw, a, self.mac["b0"], "g1")
            pin(self.back, GATEWAY6_BACKEND_SIDE, self.mac["g1"], "b0")

    def spawn(self, ns, script, *args, log=None):
        out = open(log, "w") if log else subprocess.PIPE
        p = subprocess.Popen(["ip", "netns", "exec", ns.name, sys.executable, "-u", "-c", script, *args],
                             stdout=out, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def start_echo(self, w):
        self.echo_log = w.file("echo.log")
        self.spawn(self.back, ECHO, str(PORT), *BACKENDS, *(BACKENDS6 if self.ipv6 else []),
                   log=self.echo_log)
        wait_until(lambda: "ready" in open(self.echo_log).read(), 10, "echo servers")

    def echoed(self, tag):
        """{(client port): backend} for the datagrams of run `tag`."""
        flows = {}
        with open(self.echo_log) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[3].startswith(tag + "-"):
                    flows.setdefault(int(parts[2]), set()).add(parts[0])
        return flows

    def converse(self, tag, flows=30, rounds=3, base=20000):
        r = self.client.run("timeout", "120", sys.executable, "-c", CLIENT_SCRIPT, VIP, str(PORT),
                            str(flows), str(rounds), str(base), tag, CLIENT, check=False)
        check_eq(r.returncode, 0, f"client: {r.stdout} {r.stderr} "
                 f"(UDP InCsumErrors {self.udp_csum_errors()})")
        return json.loads(r.stdout)

    def interface_stat(self, ns, ifname, stat):
        """A counter of /sys/class/net/IF/statistics, read inside the interface's namespace."""
        return int(ns.run("cat", f"/sys/class/net/{ifname}/statistics/{stat}").stdout)

    def close(self):
        end_all(self.procs, self.spaces)


def fastpath_config(w, backends=BACKENDS, frame_bytes=4096, ipv6=False):
    """ferryd on the lab's gateway; ipv6: the echo service on VIP6 too (Lab(ipv6=True))."""
    services = [{"name": "echo", "vip": VIP, "port": PORT, "protocols": ["udp"],
                 "backends": [f"{b}:{PORT}" for b in backends]}]
    if ipv6:
        services.append({"name": "echo6", "vip": VIP6, "port": PORT, "protocols": ["udp"],
                         "backends": [f"[{b}]:{PORT}" for b in BACKENDS6]})
    return base_config(w, xdp={
        "interfaces": [{"name": "g0"}, {"name": "g1"}],
        "umem": {"frames": 4096, "frame_bytes": frame_bytes},
        "rings": {"fill": 512, "completion": 512, "rx": 512, "tx": 512},
    }, services=services, routes=[{"prefix": ROUTED_PREFIX, "via": "g1"}])


def check_one_match(d, matched):
    """One match per frame: where the kernel lets the XDP program pass its match in the metadata
    before each frame (status `xdp.metadata`; AF_XDP copies it with the frame in copy mode on
    veth), the workers took it for every frame and matched none again; where it does not, the
    workers matched at least the `matched` frames the test sent through a service themselves."""
    metadata = ok(d.request("status"), "status")["xdp"]["metadata"]
    again = total(d, "ferry_xsk_matched_without_hint_total")
    print(f"xdp metadata {metadata}: {again} frames matched by the workers", flush=True)
    if metadata:
        check_eq(again, 0, "frames the workers had to match again")
    else:
        check(again >= matched, f"without XDP metadata the workers matched every frame: {again} "
              f"of at least {matched}")


def frames_by_queue(d):
    frames = {}
    for labels, v in samples(d, "ferry_xsk_frames"):
        frames.setdefault(labels["queue"], {})[labels["where"]] = v
    slabs = {labels["queue"]: v for labels, v in samples(d, "ferry_xsk_slab_frames")}
    return frames, slabs


def check_conserved(d):
    """Once the workers are quiet, every queue's frames add up to its slab and no slab refused a
    frame."""
    quiescent(d)
    frames, slabs = frames_by_queue(d)
    for q, terms in frames.items():
        check_eq(sum(terms.values()), slabs[q], f"queue {q} conservation {terms}")
    check_eq(total(d, "ferry_xsk_rejected_frames_total"), 0, "no frame refused by a slab")


def quiescent(d, timeout=30):
    """Waits until the workers' counters stop moving (a blast has drained)."""
    last = [None]

    def still():
        now = (total(d, "ferry_xsk_rx_packets_total"), total(d, "ferry_xsk_tx_packets_total"))
        same = now == last[0]
        last[0] = now
        return same
    wait_until(still, timeout, "the fast path to go quiet", interval=0.3)
