"""The fleet lab (test_fleet.py): a router namespace running BIRD with ECMP (merge paths, layer-4
multipath hash) towards two ferry gateway namespaces, each with its own BIRD in an eBGP session
to the router; clients behind the router, three backends on a bridge behind both gateways.

    client (c0) -- (rc) router (r1) -- (ga) gateway 1 (gb) -- (bp1) br0: 3 backends, BIRD
                           (r2) -- (ga) gateway 2 (gb) -- (bp2) br0

Each gateway's BIRD learns what ferryd publishes in kernel table 100 (proto 70) and exports it
to the router. The backends' replies to clients leave through either gateway (an ECMP route with
the layer-4 hash, so a flow's replies may take the other gateway than its requests: ferry
rewrites replies statelessly); that return route is BGP too: each gateway's BIRD announces the
client network to the backends' BIRD only while ferryd announces the UDP VIP there (a static
route recursive through the VIP's host route), so a gateway that stops serving stops attracting
replies as well as requests. BGP timers: hold 3 s, keepalive 1 s, connect delay and retry 1 s;
a withdrawal is sent at once and does not wait for them. No BFD: every failure here is a
withdrawal (a SIGKILLed ferryd's routes are withdrawn by `ferryd --withdraw`), not a dead peer.

Helpers here build the namespaces, the BIRD configs and processes, the backends (UDP echo that
tags each reply with the backend's address, a UDP health responder, a TCP echo) and the clients
(numbered fixed-rate UDP flows, long-lived TCP connections), and read the router's routes."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

from harness import Piped, TestFailure, base_config, check, check_eq, wait_until
from netns import Netns, veth

CLIENT = "10.30.0.2"
ROUTER_CLIENT_SIDE = "10.30.0.1"
CLIENT_NET = "10.30.0.0/24"
# gateway n: (router side, gateway side) of its link to the router, its backend-side address
UPLINK = {1: ("10.30.1.1", "10.30.1.2"), 2: ("10.30.2.1", "10.30.2.2")}
BACKSIDE = {1: "10.30.10.251", 2: "10.30.10.252"}
BACKEND_BIRD = "10.30.10.1"
BACKENDS = ["10.30.10.2", "10.30.10.3", "10.30.10.4"]
UDP_VIP = "10.30.100.10"
UDP_PORT = 5300
HEALTH_PORT = 5301
TCP_VIP = "10.30.100.11"
TCP_PORT = 7000
VIPS = [UDP_VIP, TCP_VIP]
TABLE = 100
PROTO = 70
AS_ROUTER, AS_GATEWAYS, AS_BACKENDS = 65000, 65001, 65002
# Lab BGP timers (seconds): the smallest hold time BIRD accepts; connect delay/retry so that a
# session comes up within a second or two of a restart.
BGP_TIMERS = ("hold time 3; keepalive time 1; connect delay time 1; connect retry time 1; "
              "error wait time 1, 2;")


def router_bird_conf():
    peers = "\n".join(
        f"protocol bgp ferry{n} from gateways {{ neighbor {UPLINK[n][1]} as {AS_GATEWAYS}; }}"
        for n in (1, 2))
    return f"""
log stderr all;
router id {ROUTER_CLIENT_SIDE};
protocol device {{ scan time 10; }}
# One kernel route with a next hop per gateway for a VIP both announce (ECMP).
protocol kernel {{
  merge paths on;
  ipv4 {{ import none; export all; }};
}}
template bgp gateways {{
  local as {AS_ROUTER};
  {BGP_TIMERS}
  ipv4 {{ import all; export none; }};
}}
{peers}
"""


def gateway_bird_conf(n):
    return f"""
log stderr all;
router id {UPLINK[n][1]};
ipv4 table vips;
ipv4 table clientnet;
protocol device {{ scan time 10; }}
# What ferryd publishes: host routes of proto {PROTO} in kernel table {TABLE}.
protocol kernel announced {{
  kernel table {TABLE};
  learn;
  scan time 10;
  ipv4 {{ table vips; import filter {{ if krt_source = {PROTO} then accept; reject; }}; export none; }};
}}
protocol bgp uplink {{
  local {UPLINK[n][1]} as {AS_GATEWAYS};
  neighbor {UPLINK[n][0]} as {AS_ROUTER};
  {BGP_TIMERS}
  ipv4 {{ table vips; import none; export all; }};
}}
# The return path: the client network towards the backends while the UDP VIP is announced
# here (resolved through the VIP's host route; unreachable, and so not exported, without it).
protocol static clientnet_static {{
  ipv4 {{ table clientnet; }};
  igp table vips;
  route {CLIENT_NET} recursive {UDP_VIP};
}}
protocol bgp backnet {{
  local {BACKSIDE[n]} as {AS_GATEWAYS};
  neighbor {BACKEND_BIRD} as {AS_BACKENDS};
  {BGP_TIMERS}
  ipv4 {{ table clientnet; import none; export filter {{ if dest = RTD_UNICAST then accept; reject; }}; }};
}}
"""


def backends_bird_conf():
    peers = "\n".join(
        f"protocol bgp ferry{n} from ferries {{ neighbor {BACKSIDE[n]} as {AS_GATEWAYS}; }}"
        for n in (1, 2))
    return f"""
log stderr all;
router id {BACKEND_BIRD};
protocol device {{ scan time 10; }}
protocol kernel {{
  merge paths on;
  ipv4 {{ import none; export all; }};
}}
template bgp ferries {{
  local {BACKEND_BIRD} as {AS_BACKENDS};
  {BGP_TIMERS}
  ipv4 {{ import all; export none; }};
}}
{peers}
"""


# The backends: on every address a UDP echo on UDP_PORT whose reply is "BACKEND PAYLOAD", a UDP
# health responder on HEALTH_PORT ("pong"), and a TCP echo on TCP_PORT.
BACKEND_SCRIPT = r"""
import selectors, socket, sys
udp_port, health_port, tcp_port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sel = selectors.DefaultSelector()
for a in sys.argv[4:]:
    for port, kind in ((udp_port, "echo"), (health_port, "health")):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind((a, port)); s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, (kind, a.encode() + b" "))
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((a, tcp_port)); l.listen(512); l.setblocking(False)
    sel.register(l, selectors.EVENT_READ, ("listen", None))
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        s, (kind, tag) = key.fileobj, key.data
        try:
            if kind == "echo":
                for _ in range(64):
                    data, peer = s.recvfrom(2048)
                    s.sendto(tag + data, peer)
            elif kind == "health":
                data, peer = s.recvfrom(2048)
                s.sendto(b"pong", peer)
            elif kind == "listen":
                c, _ = s.accept(); c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, ("conn", None))
            else:
                data = s.recv(65536)
                if data:
                    s.send(data)
                else:
                    sel.unregister(s); s.close()
        except BlockingIOError:
            pass
        except OSError:
            if kind == "conn":
                sel.unregister(s); s.close()
"""

# The UDP flow client: flow i is a socket bound to CLIENT:BASE+i sending "PORT SEQ" to the VIP
# every PERIOD (one global sequence number per tick, from 1). Per flow it keeps one character
# per sequence number: '.' no reply (yet), 'a'/'b'/'c' the backend (index in BACKENDS) that
# answered, '?' a reply from another source than the VIP (counted in "bad": a reply forwarded
# without the rewrite); a second reply to one seq counts in "dups". Commands on stdin, one
# answer line each: "dump PATH" -> "dumped", "stop" -> exits after "stopped".
FLOW_CLIENT = r"""
import json, os, select, socket, sys, time
vip, port, client_ip = sys.argv[1], int(sys.argv[2]), sys.argv[3]
n, base, period = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
backends = sys.argv[7].split(",")
letter = {b.encode(): chr(ord("a") + i) for i, b in enumerate(backends)}
ep = select.epoll(); ep.register(0, select.EPOLLIN)
socks, by_fd, got = [], {}, {}
for i in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((client_ip, base + i)); s.setblocking(False)
    socks.append(s); by_fd[s.fileno()] = base + i; got[base + i] = bytearray()
    ep.register(s.fileno(), select.EPOLLIN)
stats = {"bad": 0, "dups": 0, "send_errors": 0, "late_ticks": 0, "malformed": 0}
seq, inbuf, running = 0, b"", True
next_tick = time.monotonic()
def answer(line):
    sys.stdout.write(line + "\n"); sys.stdout.flush()
while running:
    now = time.monotonic()
    if now >= next_tick:
        seq += 1
        for p, s in zip(range(base, base + n), socks):
            got[p].append(ord("."))
            try:
                s.sendto(b"%d %d" % (p, seq), (vip, port))
            except OSError:
                stats["send_errors"] += 1
        next_tick += period
        if next_tick < now:
            stats["late_ticks"] += 1; next_tick = now + period
    for fd, _ in ep.poll(max(0.0, next_tick - time.monotonic())):
        if fd == 0:
            data = os.read(0, 65536)
            if not data:
                running = False; break
            inbuf += data
            while b"\n" in inbuf:
                line, inbuf = inbuf.split(b"\n", 1)
                words = line.decode().split()
                if words and words[0] == "dump":
                    with open(words[1] + ".tmp", "w") as f:
                        json.dump({"seq": seq, "period": period, "stats": stats,
                                   "flows": {str(p): g.decode() for p, g in got.items()}}, f)
                    os.rename(words[1] + ".tmp", words[1]); answer("dumped")
                elif words and words[0] == "stop":
                    running = False
            continue
        p = by_fd[fd]
        s = socks[p - base]
        while True:
            try:
                data, src = s.recvfrom(2048)
            except BlockingIOError:
                break
            words = data.split(b" ")
            try:
                if words[0] in letter:
                    fp, sq, mark = int(words[1]), int(words[2]), letter[words[0]]
                else:
                    fp, sq, mark = int(words[0]), int(words[1]), "?"
            except (ValueError, IndexError):
                stats["malformed"] += 1; continue
            if src != (vip, port):
                stats["bad"] += 1; mark = "?"
            if fp != p or not 1 <= sq <= seq:
                stats["malformed"] += 1; continue
            g = got[p]
            if g[sq - 1] != ord("."):
                stats["dups"] += 1; continue
            g[sq - 1] = ord(mark)
answer("stopped")
"""

# Long-lived TCP connections to the TCP VIP from fixed source ports, and probes through them.
# Commands: "open N BASE" -> "opened {port: ok|error}" (connect and one echo round trip each);
# "probe TIMEOUT" -> "probed {port: ok|reset|timeout|eof|closed}" (one round trip on every
# connection still alive, all at once; a failed one is closed and stays failed);
# "new N BASE TIMEOUT" -> "new {port: ok|error}" (short connections: connect, round trip, close).
TCP_CLIENT = r"""
import json, select, socket, sys, time
vip, port, client_ip = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = {}
def roundtrips(items, timeout):
    out, pending = {}, {}
    for p, s in items:
        if s is None:
            continue
        try:
            s.send(b"ping %d\n" % p); pending[s.fileno()] = (p, s, b"")
        except ConnectionResetError:
            out[p] = "reset"
        except OSError as e:
            out[p] = "error " + str(e.errno)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select([v[1] for v in pending.values()], [], [], max(0, deadline - time.monotonic()))
        for s in r:
            p, _, buf = pending[s.fileno()]
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                out[p] = "reset"; del pending[s.fileno()]; continue
            except OSError as e:
                out[p] = "error " + str(e.errno); del pending[s.fileno()]; continue
            if not data:
                out[p] = "eof"; del pending[s.fileno()]; continue
            buf += data
            if buf == b"ping %d\n" % p:
                out[p] = "ok"; del pending[s.fileno()]
            else:
                pending[s.fileno()] = (p, s, buf)
    for p, s, _ in pending.values():
        out[p] = "timeout"
    return out
def connect(p, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((client_ip, p)); s.settimeout(timeout)
    s.connect((vip, port)); s.setblocking(False)
    return s
for line in sys.stdin:
    w = line.split()
    if w[0] == "open":
        res = {}
        for p in range(int(w[2]), int(w[2]) + int(w[1])):
            try:
                conns[p] = connect(p, 3)
            except OSError as e:
                res[p] = "error " + str(e)
        res.update(roundtrips(list(conns.items()), 3))
        for p, r in res.items():
            if r != "ok" and p in conns:
                conns.pop(p).close()
        print("opened " + json.dumps(res), flush=True)
    elif w[0] == "probe":
        res = roundtrips([(p, s) for p, s in conns.items() if s is not None], float(w[1]))
        for p, r in res.items():
            if r != "ok":
                conns[p].close(); conns[p] = None
        res.update({p: "closed" for p, s in conns.items() if s is None and p not in res})
        print("probed " + json.dumps(res), flush=True)
    elif w[0] == "new":
        res = {}
        for p in range(int(w[2]), int(w[2]) + int(w[1])):
            try:
                s = connect(p, float(w[3]))
                res.update(roundtrips([(p, s)], float(w[3])))
                s.close()
            except OSError as e:
                res[p] = "error " + str(e)
        print("new " + json.dumps(res), flush=True)
"""


class FlowClient(Piped):
    def __init__(self, lab, w, flows, base, period):
        super().__init__(lab.client, FLOW_CLIENT,
                         [UDP_VIP, UDP_PORT, CLIENT, flows, base, period, ",".join(BACKENDS)],
                         w.file("flows.err"))
        self.w = w
        self.ports = list(range(base, base + flows))
        self.period = period
        self.dumps = 0

    def dump(self):
        self.dumps += 1
        path = self.w.file(f"flows-{self.dumps}.json")
        check_eq(self.cmd(f"dump {path}"), "dumped", "flow client dump")
        with open(path) as f:
            return json.load(f)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.write(b"stop\n")
            self.proc.stdin.flush()
            check_eq(self.read_line(10), "stopped", "flow client stop")
            self.proc.wait(timeout=10)


def backend_of(letter):
    return BACKENDS[ord(letter) - ord("a")] if "a" <= letter <= "c" else letter


class TcpClient(Piped):
    def __init__(self, lab, w):
        super().__init__(lab.client, TCP_CLIENT, [TCP_VIP, TCP_PORT, CLIENT], w.file("tcp.err"))

    def _json(self, line, word, timeout):
        answer = self.cmd(line, timeout)
        check(answer.startswith(word + " "), f"tcp client: {answer}")
        return {int(k): v for k, v in json.loads(answer[len(word) + 1:]).items()}

    def open(self, n, base):
        return self._json(f"open {n} {base}", "opened", 60)

    def probe(self, timeout=2.0):
        return self._json(f"probe {timeout}", "probed", timeout + 30)

    def new(self, n, base, timeout=2.0):
        return self._json(f"new {n} {base} {timeout}", "new", n * 2 * timeout + 30)


class FleetLab:
    """The namespaces, links, addresses and BIRDs of the fleet lab; every process it starts and
    every namespace it creates go in close()."""

    def __init__(self, w):
        self.w = w
        self.spaces = []
        self.procs = []
        self.birds = {}
        try:
            self.client = self.space("flc")
            self.router = self.space("flr")
            self.gw = {n: self.space(f"flg{n}") for n in (1, 2)}
            self.back = self.space("flb")
            veth(self.client, "c0", self.router, "rc")
            self.client.ip("addr", "add", f"{CLIENT}/24", "dev", "c0")
            self.client.ip("route", "add", "default", "via", ROUTER_CLIENT_SIDE)
            self.router.ip("addr", "add", f"{ROUTER_CLIENT_SIDE}/24", "dev", "rc")
            self.back.ip("link", "add", "br0", "type", "bridge")
            self.back.ip("link", "set", "br0", "up")
            for a in [BACKEND_BIRD] + BACKENDS:
                self.back.ip("addr", "add", f"{a}/24", "dev", "br0")
            for n, g in self.gw.items():
                veth(self.router, f"r{n}", g, "ga")
                self.router.ip("addr", "add", f"{UPLINK[n][0]}/24", "dev", f"r{n}")
                g.ip("addr", "add", f"{UPLINK[n][1]}/24", "dev", "ga")
                veth(g, "gb", self.back, f"bp{n}")
                self.back.ip("link", "set", f"bp{n}", "master", "br0")
                g.ip("addr", "add", f"{BACKSIDE[n]}/24", "dev", "gb")
                g.ip("route", "add", CLIENT_NET, "via", UPLINK[n][0], "dev", "ga")
                g.ip("addr", "add", f"{TCP_VIP}/32", "dev", "lo")  # the TCP proxy listens on it
                g.run("sysctl", "-qw", "net.ipv4.ip_forward=1")
            for ns in (self.router, self.back):
                ns.run("sysctl", "-qw", "net.ipv4.ip_forward=1")
                ns.run("sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1")
        except Exception:
            self.close()
            raise

    def space(self, tag):
        ns = Netns(tag, ipv6=False)
        self.spaces.append(ns)
        return ns

    def spawn(self, ns, args, log):
        p = subprocess.Popen(["ip", "netns", "exec", ns.name, *args], stdout=open(log, "w"),
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    # ------------------------------------------------------------------ BIRD
    def start_birds(self):
        self.bird("router", self.router, router_bird_conf())
        self.bird("backends", self.back, backends_bird_conf())
        for n, g in self.gw.items():
            self.bird(f"gw{n}", g, gateway_bird_conf(n))

    def bird(self, name, ns, conf):
        path = self.w.file(f"bird-{name}.conf")
        with open(path, "w") as f:
            f.write(conf)
        sock = self.w.file(f"bird-{name}.ctl")
        proc = self.spawn(ns, ["bird", "-f", "-c", path, "-s", sock, "-P", self.w.file(f"bird-{name}.pid")],
                          self.w.file(f"bird-{name}.log"))
        self.birds[name] = (ns, sock, proc)
        wait_until(lambda: os.path.exists(sock) or proc.poll() is not None, 10, f"BIRD {name} socket")
        check(proc.poll() is None, f"BIRD {name} exited {proc.returncode}: "
              f"{open(self.w.file(f'bird-{name}.log')).read()}")

    def birdc(self, name, *cmd):
        ns, sock, _ = self.birds[name]
        return ns.run("birdc", "-s", sock, *cmd, check=False).stdout

    def established(self, name, protocol):
        return "Established" in self.birdc(name, "show", "protocols", protocol)

    def await_sessions(self, timeout=30):
        pairs = [("router", "ferry1"), ("router", "ferry2"), ("backends", "ferry1"),
                 ("backends", "ferry2"), ("gw1", "uplink"), ("gw1", "backnet"), ("gw2", "uplink"),
                 ("gw2", "backnet")]
        wait_until(lambda: all(self.established(b, p) for b, p in pairs), timeout,
                   "every BGP session Established: " + "; ".join(
                       f"{b}/{p}: {self.birdc(b, 'show', 'protocols', p).strip().splitlines()[-1:]}"
                       for b, p in pairs), interval=0.1)

    # ------------------------------------------------------------------ routes
    def next_hops(self, ns, prefix):
        """The next-hop addresses of the main-table route for `prefix` in `ns` (sorted)."""
        routes = json.loads(ns.ip("-j", "route", "show", prefix).stdout or "[]")
        hops = []
        for r in routes:
            if "nexthops" in r:
                hops += [h["gateway"] for h in r["nexthops"] if "gateway" in h]
            elif "gateway" in r:
                hops.append(r["gateway"])
        return sorted(hops)

    def router_hops(self, vip):
        return self.next_hops(self.router, f"{vip}/32")

    def return_hops(self):
        return self.next_hops(self.back, CLIENT_NET)

    def await_hops(self, vip, gateways, timeout=15, what=""):
        """Waits until the router's route for `vip` has exactly one next hop per gateway in
        `gateways` (and the backends' return route the same, for the UDP VIP); returns the time
        it took in s."""
        want = sorted(UPLINK[n][1] for n in gateways)
        want_back = sorted(BACKSIDE[n] for n in gateways)
        started = time.monotonic()

        def settled():
            return self.router_hops(vip) == want and (vip != UDP_VIP or self.return_hops() == want_back)
        try:
            wait_until(settled, timeout, f"{what}: the router's route to {vip} via {want}", interval=0.01)
        except TestFailure as e:
            raise TestFailure(f"{e}; now router {self.router_hops(vip)}, backends' return route "
                              f"{self.return_hops()}; gw BIRDs: "
                              + " | ".join(self.birdc(f"gw{n}", "show", "route", "all", "table", "vips")
                                           for n in (1, 2))) from None
        return time.monotonic() - started

    def announced_routes(self, n):
        """ferry's routes in gateway n's table (ip route show table 100 proto 70): [dst, ...]."""
        out = self.gw[n].ip("-j", "route", "show", "table", str(TABLE), "proto", str(PROTO)).stdout
        return sorted(r["dst"] for r in json.loads(out or "[]"))

    def path_of(self, proto, sport, dport, vip):
        """The gateway (1 or 2) the router's ECMP hash sends a client flow to."""
        out = self.router.ip("-j", "route", "get", vip, "from", CLIENT, "iif", "rc", "ipproto", proto,
                             "sport", str(sport), "dport", str(dport)).stdout
        via = json.loads(out)[0].get("gateway")
        return {UPLINK[n][1]: n for n in (1, 2)}.get(via, via)

    def tcp_gateways(self):
        """{client port: gateway n} of the TCP connections established to the TCP VIP on each
        gateway's proxy (`ss` in its namespace). The router's hash cannot be predicted for TCP:
        the client socket's random hash (sk_txhash) rides on the skb across veth and the router
        uses it (fib_multipath_hash takes an skb's L4 hash as it is)."""
        out = {}
        for n, g in self.gw.items():
            ss = g.run("ss", "-Htn", "state", "established", "src", f"{TCP_VIP}:{TCP_PORT}").stdout
            for line in ss.splitlines():
                peer = line.split()[-1]
                if peer.startswith(CLIENT + ":"):
                    out[int(peer.rsplit(":", 1)[1])] = n
        return out

    def uplink_tx(self):
        """{gateway: packets the router sent on its link to it} (the router's r1/r2 counters)."""
        return {n: int(self.router.run("cat", f"/sys/class/net/r{n}/statistics/tx_packets").stdout)
                for n in (1, 2)}

    # ------------------------------------------------------------------ backends
    def start_backends(self):
        log = self.w.file("backends.log")
        p = self.spawn(self.back, [sys.executable, "-u", "-c", BACKEND_SCRIPT, str(UDP_PORT),
                                   str(HEALTH_PORT), str(TCP_PORT), *BACKENDS], log)
        wait_until(lambda: "ready" in open(log).read() or p.poll() is not None, 10, "backends")
        check(p.poll() is None, f"backends exited: {open(log).read()}")

    def refuse_health(self, n):
        """The backends' health responder stops answering gateway n's checks (nft in the
        backends' namespace: its checks' datagrams are dropped; the data path is untouched)."""
        rules = (f"table inet fleetlab {{\n chain input {{\n  type filter hook input priority 0;\n"
                 f"  ip saddr {BACKSIDE[n]} udp dport {HEALTH_PORT} drop\n }}\n}}\n")
        self.back.nft(rules, f"refusing gateway {n}'s health checks")

    def answer_health(self):
        self.back.run("nft", "delete", "table", "inet", "fleetlab", check=False)

    def close(self):
        for p in self.procs:
            with contextlib.suppress(Exception):
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)
        for ns in self.spaces:
            ns.close()


def gateway_config(w, n):
    """ferryd's config in gateway n: XDP on ga and gb; the UDP service on the fast path with udp
    health checks on HEALTH_PORT; the TCP service proxied by ferryd to the backends' TCP echo,
    with tcp checks; announcing into table 100."""
    health = {"interval_ms": 200, "timeout_ms": 150, "rise": 2, "fall": 2}
    cfg = base_config(w, xdp={
        "interfaces": [{"name": "ga"}, {"name": "gb"}],
        "umem": {"frames": 4096, "frame_bytes": 2048},
        "rings": {"fill": 512, "completion": 512, "rx": 512, "tx": 512},
    }, services=[
        {"name": "udp", "vip": UDP_VIP, "port": UDP_PORT, "protocols": ["udp"],
         "backends": [f"{b}:{UDP_PORT}" for b in BACKENDS],
         "health": dict(health, type="udp", port=HEALTH_PORT, send="ping", expect="pong")},
        {"name": "tcp", "vip": TCP_VIP, "port": TCP_PORT, "protocols": ["tcp"],
         "backends": [f"{b}:{TCP_PORT}" for b in BACKENDS], "health": dict(health)},
    ], tcp={"workers": 1, "proxy": {"drain_timeout_ms": 200}})
    cfg["control"]["socket"] = w.file(f"ctl{n}/ferryd.sock")
    cfg["announce"] = {"table": TABLE, "min_backends": 1, "withdraw_grace_ms": 1000}
    return cfg
