#!/usr/bin/env python3
"""The AF_XDP fast path end to end. Three namespaces: client -- ferry gateway (two 2-queue veth
ports, ferryd's workers between them) -- backends (3 UDP echo servers and a sink). UDP to the VIP
is balanced and answered from the VIP, routed UDP arrives with TTL-1, TCP and ICMP still go
through the kernel, every slab's frames are accounted for after a blast, a reload that removes a
backend moves only its flows, and SIGKILL leaves nothing behind."""
import json
import os
import subprocess

from harness import SOURCE_ROOT, base_config, check, check_eq, ok, run_tests, running, wait_until
from netns import Netns, xdp_attached, sh

VIP = "10.10.100.10"
PORT = 5300
CLIENT = "10.10.1.2"
BACKENDS = ["10.10.2.2", "10.10.2.3", "10.10.2.4"]
SINK = "10.10.3.5"

# veth from the local stack hands AF_XDP frames whose UDP checksum is only the pseudo-header sum
# (CHECKSUM_PARTIAL): the senders compute full checksums instead, as a real NIC's peer would
# deliver them. SIOCETHTOOL/ETHTOOL_STXCSUM, so the test needs no ethtool binary.
TX_CSUM_OFF = r"""
import ctypes, fcntl, socket, struct, sys
buf = ctypes.create_string_buffer(struct.pack("II", 0x17, 0))
ifr = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(buf)).ljust(40, b"\0")
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    fcntl.ioctl(s.fileno(), 0x8946, ifr)
"""

# Echo servers on every backend address; logs "backend client_ip client_port payload-head".
ECHO = r"""
import select, socket, sys
socks = []
for a in sys.argv[2:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
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
        print(s.getsockname()[0], peer[0], peer[1], data[:24].split(b" ")[0].decode(errors="replace"))
        s.sendto(data, peer)
"""

# One request/reply per flow and round; a lost one is sent again (the first packets towards a
# next hop the gateway has not resolved yet are dropped while it resolves).
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

# Fire-and-forget datagrams, as fast as python goes.
BLAST = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
targets = [(sys.argv[1], int(sys.argv[2]))]
payload = b"blast " + b"x" * 26
for i in range(int(sys.argv[3])):
    s.sendto(payload, targets[0])
"""

# Receives routed datagrams, prints "ttl length" for each (IP_RECVTTL = 12, IP_TTL = 2).
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


class Lab:
    """client (c0) -- (g0) gateway (g1) -- (b0) backends, two queues on every veth."""

    def __init__(self):
        self.spaces = []
        self.procs = []
        try:
            self.client, self.gw, self.back = (self.space(t) for t in ("fpc", "fpg", "fpb"))
            self.link(self.client, "c0", self.gw, "g0")
            self.link(self.gw, "g1", self.back, "b0")
            self.client.ip("addr", "add", f"{CLIENT}/24", "dev", "c0")
            self.gw.ip("addr", "add", "10.10.1.1/24", "dev", "g0")
            self.gw.ip("addr", "add", "10.10.2.1/24", "dev", "g1")
            for a in BACKENDS:
                self.back.ip("addr", "add", f"{a}/24", "dev", "b0")
            self.back.ip("addr", "add", f"{SINK}/32", "dev", "b0")
            self.client.ip("route", "add", "default", "via", "10.10.1.1")
            self.back.ip("route", "add", "default", "via", "10.10.2.1", "src", BACKENDS[0])
            # The routed prefix leaves g1 through a gateway: ferry must use the kernel's next hop.
            self.gw.ip("route", "add", "10.10.3.0/24", "via", BACKENDS[0], "dev", "g1")
            self.gw.run("sysctl", "-qw", "net.ipv4.ip_forward=1")
            self.client.run("python3", "-c", TX_CSUM_OFF, "c0")
            self.back.run("python3", "-c", TX_CSUM_OFF, "b0")
            self.echo_log = None
        except Exception:
            self.close()
            raise

    def space(self, tag):
        ns = Netns(tag)
        self.spaces.append(ns)
        for knob in ("all", "default"):
            ns.run("sysctl", "-qw", f"net.ipv6.conf.{knob}.disable_ipv6=1")
        return ns

    def link(self, a, name_a, b, name_b):
        sh("ip", "-n", a.name, "link", "add", name_a, "numrxqueues", "2", "numtxqueues", "2", "type",
           "veth", "peer", "name", name_b, "netns", b.name, "numrxqueues", "2", "numtxqueues", "2")
        a.ip("link", "set", name_a, "up")
        b.ip("link", "set", name_b, "up")

    def spawn(self, ns, script, *args, log=None):
        out = open(log, "w") if log else subprocess.PIPE
        p = subprocess.Popen(["ip", "netns", "exec", ns.name, "python3", "-u", "-c", script, *args],
                             stdout=out, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def start_echo(self, w):
        self.echo_log = w.file("echo.log")
        self.spawn(self.back, ECHO, str(PORT), *BACKENDS, log=self.echo_log)
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
        r = self.client.run("timeout", "120", "python3", "-c", CLIENT_SCRIPT, VIP, str(PORT),
                            str(flows), str(rounds), str(base), tag, CLIENT, check=False)
        check_eq(r.returncode, 0, f"client: {r.stdout} {r.stderr}")
        return json.loads(r.stdout)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for ns in self.spaces:
            ns.close()


def fastpath_config(w, backends=BACKENDS):
    return base_config(w, xdp={
        "interfaces": [{"name": "g0"}, {"name": "g1"}],
        "umem": {"frames": 4096, "frame_bytes": 4096},
        "rings": {"fill": 512, "completion": 512, "rx": 512, "tx": 512},
    }, services=[{"name": "echo", "vip": VIP, "port": PORT, "protocols": ["udp"],
                  "backends": [f"{b}:{PORT}" for b in backends]}],
        routes=[{"prefix": "10.10.3.0/24", "via": "g1"}])


def samples(d, family):
    fams = ok(d.request("stats", {"prefix": family}))["metrics"]
    fam = [f for f in fams if f["name"] == family]
    return [(s["labels"], s["value"]) for s in fam[0]["samples"]] if fam else []


def total(d, family, **match):
    return sum(v for labels, v in samples(d, family)
               if all(labels.get(k) == str(x) for k, x in match.items()))


def frames_by_queue(d):
    frames = {}
    for labels, v in samples(d, "ferry_xsk_frames"):
        frames.setdefault(labels["queue"], {})[labels["where"]] = v
    slabs = {labels["queue"]: v for labels, v in samples(d, "ferry_xsk_slab_frames")}
    return frames, slabs


def quiescent(d):
    """Waits until the workers' counters stop moving (the blast has drained)."""
    last = [None]

    def still():
        now = (total(d, "ferry_xsk_rx_packets_total"), total(d, "ferry_xsk_tx_packets_total"))
        same = now == last[0]
        last[0] = now
        return same
    wait_until(still, 30, "the fast path to go quiet", interval=0.3)


def balances_udp_across_three_backends_with_vip_replies(w):
    lab = Lab()
    try:
        lab.start_echo(w)
        with running(w, fastpath_config(w), netns=lab.gw.name) as d:
            res = lab.converse("bal", flows=30, rounds=3)
            check_eq((res["ok"], res["bad"], res["lost"]), (90, 0, 0), f"replies {res}")
            flows = lab.echoed("bal")
            check_eq(len(flows), 30, "flows seen by the backends")
            check(all(len(b) == 1 for b in flows.values()), f"a flow stays on its backend: {flows}")
            per_backend = {b: sum(1 for s in flows.values() if b in s) for b in BACKENDS}
            check(all(n > 0 for n in per_backend.values()), f"every backend serves: {per_backend}")
            check(total(d, "ferry_xdp_packets_total", action="redirect") >= 180,
                  "requests and replies were redirected to AF_XDP")
            for iface in ("g0", "g1"):
                check(total(d, "ferry_xsk_tx_packets_total", iface=iface) >= 90, f"tx on {iface}")
            for q in ("0", "1"):
                check(total(d, "ferry_xsk_rx_packets_total", queue=q) > 0, f"queue {q} worked")
            for reason in ("unexpected", "malformed", "no_route", "tx_ring_full", "no_tx_queue"):
                check_eq(total(d, "ferry_xsk_drops_total", reason=reason), 0, f"{reason} drops")
            status = ok(d.request("status"))["xdp"]
            for iface in status["interfaces"]:
                check_eq((iface["xsk_mode"], iface["xsk_queues"]), ("copy", "0,1"),
                         f"{iface['name']} bind info")
            check_eq(status["fastpath"]["workers"], 2, "workers in status")
            with open(os.path.join(SOURCE_ROOT, "docs", "metrics.md")) as f:
                doc = f.read()
            families = [f["name"] for f in ok(d.request("stats"))["metrics"]]
            missing = [f for f in families if f"`{f}`" not in doc]
            check(not missing, f"families missing from docs/metrics.md: {missing}")
            rows = [r for r in ok(d.request("workers"))["workers"] if r["kind"] == "xdp"]
            check_eq(sorted(r["name"] for r in rows), ["xdp-0", "xdp-1"], "worker rows")
            check(all(r["alive"] and r["ports"] == "g0,g1" for r in rows), f"rows {rows}")
    finally:
        lab.close()


def routes_udp_with_ttl_decremented(w):
    lab = Lab()
    try:
        with running(w, fastpath_config(w), netns=lab.gw.name) as d:
            sink = lab.spawn(lab.back, SINK_SCRIPT, SINK, "9999", "3")
            check_eq(sink.stdout.readline().strip(), "ready", "sink ready")
            send = ("import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                    "for i in range(40):\n s.sendto(b'routed %03d ' % i + b'r' * 200, "
                    f"('{SINK}', 9999)); time.sleep(0.01)\n")
            lab.client.run("python3", "-c", send)
            out, _ = sink.communicate(timeout=20)
            got = [l.split() for l in out.splitlines() if l and l[0].isdigit()]
            check(len(got) >= 30, f"routed datagrams arrived ({len(got)} of 40): {out}")
            check(all(g[0] == "63" for g in got), f"TTL 64 - 1 at the sink: {got[:5]}")
            check(all(g[1] == "211" for g in got), "payload length intact")
            lost = 40 - len(got)
            check_eq(total(d, "ferry_xsk_drops_total", reason="neighbour_miss") >= lost, True,
                     "only neighbour misses (while the next hop resolved) lost datagrams")
            check(total(d, "ferry_xsk_tx_packets_total", iface="g1") >= len(got), "sent by ferry")
    finally:
        lab.close()


def tcp_and_icmp_still_go_through_the_kernel(w):
    lab = Lab()
    try:
        with running(w, fastpath_config(w), netns=lab.gw.name) as d:
            passed = total(d, "ferry_xdp_packets_total", action="pass")
            r = lab.client.run("ping", "-c", "3", "-i", "0.2", "-W", "2", BACKENDS[1], check=False)
            check_eq(r.returncode, 0, f"ping across the gateway: {r.stdout}")
            r = lab.client.run("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.10.1.1", check=False)
            check_eq(r.returncode, 0, f"ping the gateway: {r.stdout}")
            server = lab.spawn(lab.back, "import socket\ns=socket.socket()\n"
                               f"s.bind(('{BACKENDS[0]}',7000));s.listen()\nprint('ready',flush=True)\n"
                               "c,_=s.accept();c.sendall(c.recv(100)[::-1])")
            check_eq(server.stdout.readline().strip(), "ready", "tcp server")
            r = lab.client.run("python3", "-c", "import socket\n"
                               f"s=socket.create_connection(('{BACKENDS[0]}',7000),timeout=5)\n"
                               "s.sendall(b'through the kernel');print(s.recv(100).decode())")
            check_eq(r.stdout.strip(), "lenrek eht hguorht", "TCP echo forwarded by the kernel")
            check(total(d, "ferry_xdp_packets_total", action="pass") >= passed + 10,
                  "ICMP and TCP were passed to the kernel")
            check_eq(total(d, "ferry_xsk_rx_packets_total"), 0, "nothing of it reached AF_XDP")
    finally:
        lab.close()


def frames_are_conserved_after_a_blast(w):
    lab = Lab()
    try:
        lab.start_echo(w)
        with running(w, fastpath_config(w), netns=lab.gw.name) as d:
            lab.converse("warm", flows=6, rounds=1)  # resolve every next hop first
            blasters = [lab.spawn(lab.client, BLAST, VIP, str(PORT), "100000") for _ in range(2)]
            for b in blasters:
                b.wait(timeout=120)
            quiescent(d)
            rx = total(d, "ferry_xsk_rx_packets_total")
            check(rx >= 100000, f"the workers saw the blast ({rx} frames)")
            frames, slabs = frames_by_queue(d)
            check_eq(sorted(frames), ["0", "1"], "a slab per queue")
            for q, terms in frames.items():
                check_eq(sum(terms.values()), slabs[q], f"queue {q} conservation {terms}")
                check_eq((terms["rx"], terms["tx"], terms["completion"], terms["hands"]),
                         (0, 0, 0, 0), f"queue {q}: nothing left in flight {terms}")
                check_eq(slabs[q], 2048, f"queue {q} slab size")
            check_eq(total(d, "ferry_xsk_rejected_frames_total"), 0, "no frame refused by a slab")
            res = lab.converse("after", flows=6, rounds=2)
            check_eq((res["ok"], res["lost"]), (12, 0), f"still serving after the blast {res}")
    finally:
        lab.close()


def reload_removing_a_backend_moves_only_its_flows(w):
    lab = Lab()
    try:
        lab.start_echo(w)
        cfg = fastpath_config(w)
        with running(w, cfg, netns=lab.gw.name) as d:
            res = lab.converse("before", flows=60, rounds=1, base=30000)
            check_eq(res["ok"], 60, f"before the reload {res}")
            before = {p: next(iter(b)) for p, b in lab.echoed("before").items()}
            generation = ok(d.request("status"))["xdp"]["fastpath"]["table_generation"]
            w.write_config(fastpath_config(w, BACKENDS[:2]))
            ok(d.request("reload"), "reload removing 10.10.2.4")
            check(xdp_attached(lab.gw, "g0") and xdp_attached(lab.gw, "g1"), "program stays attached")
            status = ok(d.request("status"))["xdp"]["fastpath"]
            check(status["table_generation"] > generation, "new tables published")
            check_eq(status["workers"], 2, "the same workers")
            res = lab.converse("after", flows=60, rounds=1, base=30000)
            check_eq(res["ok"], 60, f"after the reload {res}")
            after = {p: next(iter(b)) for p, b in lab.echoed("after").items()}
            moved = [p for p in before if before[p] != after[p]]
            removed = [p for p in before if before[p] == BACKENDS[2]]
            check(removed, "some flows were on the removed backend")
            check_eq(sorted(moved), sorted(removed), "only the removed backend's flows moved")
            check(BACKENDS[2] not in after.values(), "nothing goes to the removed backend")
    finally:
        lab.close()


def sigkill_leaves_no_program_and_restart_works(w):
    lab = Lab()
    try:
        lab.start_echo(w)
        cfg = fastpath_config(w)
        with running(w, cfg, netns=lab.gw.name) as d:
            check(lab.converse("first", flows=4, rounds=1)["ok"] == 4, "serving")
            d.kill()
            wait_until(lambda: not xdp_attached(lab.gw, "g0") and not xdp_attached(lab.gw, "g1"),
                       5, "the kernel to release the bpf_links")
            ss = lab.gw.run("ss", "--xdp", "-a", "-n").stdout
            check_eq(ss.count("\n"), 1, f"no AF_XDP socket left: {ss}")
        with running(w, cfg, netns=lab.gw.name, name="second") as d2:
            res = lab.converse("second", flows=10, rounds=2)
            check_eq((res["ok"], res["lost"]), (20, 0), f"second daemon serves {res}")
            check_eq(d2.stop(), 0, "graceful exit")
            check(not xdp_attached(lab.gw, "g0"), "detached after SIGTERM")
    finally:
        lab.close()


if __name__ == "__main__":
    run_tests([
        balances_udp_across_three_backends_with_vip_replies,
        routes_udp_with_ttl_decremented,
        tcp_and_icmp_still_go_through_the_kernel,
        frames_are_conserved_after_a_blast,
        reload_removing_a_backend_moves_only_its_flows,
        sigkill_leaves_no_program_and_restart_works,
    ])
