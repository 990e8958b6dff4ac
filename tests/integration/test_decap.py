"""ferry-decap on a direct-server-return backend: a "gateway" namespace sends IPIP and GUE frames
(IPv4 and IPv6, every outer/inner combination) whose inner packet goes from a client address to a
VIP on the backend's loopback; ferry-decap, attached to the backend's veth, strips them, the
backend's UDP responder and TCP listener see the client's own address, and the answers leave the
backend straight for the client (captured on the gateway's side of the veth). A tunnel frame to
an address that is not the backend's is refused and counted; status --json counts what was sent;
detach takes the program and its pins away. The kernel here has no ipip/ip6tnl/fou modules, so
ferry-decap is the only decapsulation the backend has."""
import json
import os
import pwd
import queue
import subprocess
import sys
import threading

from harness import SOURCE_ROOT, TestFailure, check, check_eq, wait_until
from netns import Netns, end_all, veth, xdp_attached

FERRY_DECAP = os.environ.get("FERRY_DECAP", "build/daemon/ferry-decap")
PEERS = os.path.join(SOURCE_ROOT, "tests", "integration", "decap_peers.py")

GATEWAY4, BACKEND4, FOREIGN4 = "10.77.1.1", "10.77.1.7", "10.77.1.8"
GATEWAY6, BACKEND6, FOREIGN6 = "2001:db8:77:1::1", "2001:db8:77:1::7", "2001:db8:77:1::8"
VIP4, VIP6 = "10.77.0.12", "2001:db8:77:ffff::12"
CLIENT4, CLIENT6 = "192.0.2.77", "2001:db8:77:c::10"
UDP_PORT, TCP_PORT, GUE_PORT = 5300, 8080, 6080


class Lab:
    """gateway (gw0) -- veth -- backend (be0, ferry-decap's interface). The backend holds the VIPs
    on lo and routes the client prefixes back through the gateway, with the sysctls a DSR backend
    needs (docs/dsr.md): loose rp_filter, and never answering ARP for the VIP."""

    def __init__(self, workdir):
        self.procs, self.spaces = [], []
        self.gateway = self._ns("decap-gw")
        self.backend = self._ns("decap-be")
        veth(self.gateway, "gw0", self.backend, "be0")
        self.gateway.add_addresses("gw0", f"{GATEWAY4}/24", f"{GATEWAY6}/64")
        self.backend.add_addresses("be0", f"{BACKEND4}/24", f"{BACKEND6}/64")
        self.backend.add_addresses("lo", f"{VIP4}/32", f"{VIP6}/128")
        self.backend.ip("route", "add", "192.0.2.0/24", "via", GATEWAY4)
        self.backend.ip("-6", "route", "add", "2001:db8:77:c::/64", "via", GATEWAY6)
        for knob in ("net.ipv4.conf.all.rp_filter=2", "net.ipv4.conf.be0.rp_filter=2",
                     "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2"):
            self.backend.run("sysctl", "-qw", knob)
        self.backend_mac = self.backend.run("cat", "/sys/class/net/be0/address").stdout.strip()
        self.pin_dir = os.path.join(workdir.path, "bpf")  # not a bpffs: ferry-decap mounts one
        self.responder = subprocess.Popen(
            ["ip", "netns", "exec", self.backend.name, sys.executable, PEERS, "responder", VIP4,
             VIP6, str(UDP_PORT), str(TCP_PORT)], stdout=subprocess.PIPE, text=True)
        self.procs.append(self.responder)
        self.lines = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line.strip()) for line in self.responder.stdout],
                         daemon=True).start()
        check_eq(self.responder_lines(1), ["ready"], "responder bound to the VIPs")

    def _ns(self, tag):
        ns = Netns(tag, ipv6=True)
        self.spaces.append(ns)
        return ns

    def decap(self, *args, netns_exec=False):
        """ferry-decap in the backend's network namespace. nsenter keeps this test's mount
        namespace, so the bpffs ferry-decap mounts outlives the command; `ip netns exec` gives
        the command one of its own (netns_exec=True)."""
        enter = ["ip", "netns", "exec", self.backend.name] if netns_exec else \
            ["nsenter", f"--net=/run/netns/{self.backend.name}"]
        return subprocess.run(enter + [FERRY_DECAP, *args, "--pin-dir", self.pin_dir], capture_output=True, text=True,
                              timeout=30)

    def status(self):
        r = self.decap("status", "--json")
        check_eq(r.returncode, 0, f"status --json: {r.stderr}")
        return json.loads(r.stdout)

    def send(self, cases):
        r = subprocess.run(["ip", "netns", "exec", self.gateway.name, sys.executable, PEERS, "send",
                            "gw0", self.backend_mac, json.dumps(cases)],
                           capture_output=True, text=True, timeout=60 + 12 * len(cases))
        check_eq(r.returncode, 0, f"sender: {r.stderr}")
        return {line["name"]: line["reply"] for line in map(json.loads, r.stdout.splitlines())}

    def responder_lines(self, count):
        """The next `count` lines the responder prints, each awaited for 10 s at most."""
        try:
            return [self.lines.get(timeout=10) for _ in range(count)]
        except queue.Empty:
            raise TestFailure(f"the responder printed fewer than {count} lines") from None

    def close(self):
        subprocess.run(["umount", "-l", self.pin_dir], capture_output=True)
        end_all(self.procs, self.spaces)


def case(name, form, outer_dst, vip, client, sport, **extra):
    outer_src = GATEWAY6 if ":" in outer_dst else GATEWAY4
    return dict(name=name, form=form, outer_src=outer_src, outer_dst=outer_dst, vip=vip,
                client=client, sport=sport, dport=UDP_PORT, payload=name, gue_port=GUE_PORT,
                await_reply=True, **extra)


FORMS = [  # (name, form, outer destination, inner VIP, client, the status counter it lands in)
    ("ipip4_in_4", "ipip", BACKEND4, VIP4, CLIENT4),
    ("ipip6_in_4", "ipip", BACKEND4, VIP6, CLIENT6),
    ("ipip4_in_6", "ipip", BACKEND6, VIP4, CLIENT4),
    ("ipip6_in_6", "ipip", BACKEND6, VIP6, CLIENT6),
    ("gue_in_4", "gue", BACKEND4, VIP4, CLIENT4),
    ("gue_in_6", "gue", BACKEND6, VIP6, CLIENT6),
]


def test_strips_every_form_replies_go_direct_refuses_foreign_and_detaches(workdir):
    lab = Lab(workdir)
    try:
        r = lab.decap("attach", "be0", "--gue-port", str(GUE_PORT))
        check_eq(r.returncode, 0, f"attach: {r.stdout}{r.stderr}")
        check(f"mounted a bpffs at {lab.pin_dir}" in r.stdout, f"attach mounted the bpffs: {r.stdout}")
        check("be0: attached in native mode, GUE port 6080" in r.stdout, f"attach: {r.stdout}")
        check(xdp_attached(lab.backend, "be0"), "ip link shows the program after the command exited")

        cases = [case(name, form, dst, vip, client, 41000 + i)
                 for i, (name, form, dst, vip, client) in enumerate(FORMS)]
        replies = lab.send(cases)
        received = lab.responder_lines(len(cases))
        for c in cases:
            check(f"udp {c['client']} {c['sport']} {c['name']}" in received,
                  f"{c['name']}: the responder got the inner datagram from the client: {received}")
            check_eq(replies[c["name"]], {"src": c["vip"], "dst": c["client"], "sport": UDP_PORT,
                                          "dport": c["sport"], "payload": "echo:" + c["name"]},
                     f"{c['name']}: the answer left the backend straight for the client")

        # A TCP handshake: the SYN arrives encapsulated, the SYN-ACK leaves directly.
        for family, form, dst, vip, client in (("4", "ipip", BACKEND4, VIP4, CLIENT4),
                                               ("6", "gue", BACKEND6, VIP6, CLIENT6)):
            syn = case(f"syn{family}", form, dst, vip, client, 42000, tcp_syn=True)
            syn["dport"] = TCP_PORT
            reply = lab.send([syn])[syn["name"]]
            check(reply is not None and reply["flags"] == 0x12 and reply["sport"] == TCP_PORT
                  and reply["dport"] == 42000, f"SYN over {form}{family}: SYN-ACK {reply}")

        # Tunnels to an address that is not the backend's: refused, counted, never delivered.
        foreign = [dict(case("foreign4", "ipip", FOREIGN4, VIP4, CLIENT4, 43000), await_reply=False),
                   dict(case("foreign6", "gue", FOREIGN6, VIP6, CLIENT6, 43001), await_reply=False)]
        lab.send(foreign)
        status = wait_until(lambda: (s := lab.status())["interfaces"][0]["refused"]["not_local"]
                            ["packets"] == 2 and s, 10, "the two foreign tunnels counted")
        iface = status["interfaces"][0]
        check_eq((iface["interface"], iface["attached"], iface["mode"], iface["gue_port"]),
                 ("be0", True, "native", GUE_PORT), "status of be0")
        expected = {name: 1 for name, *_ in FORMS}
        expected["ipip4_in_4"] += 1  # the IPv4 SYN
        expected["gue_in_6"] += 1  # the IPv6 SYN
        check_eq({k: v["packets"] for k, v in iface["stripped"].items()}, expected, "stripped")
        check_eq({k: v["packets"] for k, v in iface["refused"].items() if v["packets"]},
                 {"not_local": 2}, "refused")
        check(iface["passed"]["packets"] > 0, "ARP/ND and the like passed untouched")
        check(lab.lines.empty(), "no foreign tunnel reached the responder")
        text = lab.decap("status")
        check("be0" in text.stdout and "stripped gue_in_6" in text.stdout, f"text status: {text.stdout}")

        r = lab.decap("detach", "be0")
        check_eq(r.returncode, 0, f"detach: {r.stderr}")
        check(not xdp_attached(lab.backend, "be0"), "no program on be0 after detach")
        check(not os.path.exists(os.path.join(lab.pin_dir, "be0")), "the pins are gone")
        check_eq(lab.status()["interfaces"], [], "status after detach")
    finally:
        lab.close()


def test_refusals_say_what_to_do(workdir):
    lab = Lab(workdir)
    try:
        r = lab.decap("attach", "be0", netns_exec=True)
        check_eq(r.returncode, 1, "attach under ip netns exec with the pin dir on no bpffs")
        check("runs in a mount namespace of its own" in r.stderr and "nsenter" in r.stderr, r.stderr)
        check(not xdp_attached(lab.backend, "be0"), "nothing attached")
        r = lab.decap("attach", "nosuch0")
        check_eq(r.returncode, 1, "no such interface")
        check("nosuch0: no such interface in this network namespace (it has: lo, be0)" in r.stderr,
              r.stderr)
        r = lab.decap("detach", "be0")
        check_eq(r.returncode, 1, "detach of what is not attached")
        check("be0: ferry-decap is not attached there" in r.stderr, r.stderr)
        r = lab.decap("attach", "be0", "--gue-port", "70000")
        check_eq(r.returncode, 2, "a bad port is a usage error")
        check("--gue-port: \"70000\" is not a port" in r.stderr, r.stderr)
        r = subprocess.run([FERRY_DECAP, "status", "--pin-dir", lab.pin_dir], capture_output=True,
                           text=True, timeout=30, user=pwd.getpwnam("nobody").pw_uid)
        check_eq(r.returncode, 1, "status as nobody")
        check("must run as root" in r.stderr, r.stderr)
        check_eq(lab.decap("attach", "be0").returncode, 0, "attach")
        r = lab.decap("attach", "be0", "--gue-port", "6081")
        check_eq(r.returncode, 0, f"attach again: {r.stderr}")
        check("be0: already attached (native mode); updated: GUE port 6081" in r.stdout, r.stdout)
        check_eq(lab.status()["interfaces"][0]["gue_port"], 6081, "the new GUE port")
        check_eq(lab.decap("detach", "be0").returncode, 0, "detach")
    finally:
        lab.close()
