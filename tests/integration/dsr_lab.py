"""The direct-server-return lab of test_dsr.py: one Ethernet segment (a bridge in a namespace of its
own) joining a client, the ferry gateway and three backends, IPv4 and IPv6, veth's default
offloads. The client reaches the VIPs through the gateway (a route via it); each backend holds
the VIPs on its loopback, never answers ARP for them, decapsulates ferry's IPIP and GUE with
ferry-decap on its NIC, and answers the client directly, from the VIP, over the segment: its
replies never cross the gateway. Real servers on the VIPs: nginx (HTTP on port 80) and dnsmasq
(DNS on port 53), each backend answering with its own name."""
import contextlib
import hashlib
import json
import os
import subprocess
import sys

from fastpath_lab import TX_CSUM
from harness import TestFailure, base_config, check_eq, wait_until
from netns import Netns, end_all, sh, veth

DECAP = os.environ.get("FERRY_DECAP", "build/daemon/ferry-decap")
NGINX = "/usr/sbin/nginx"
DNSMASQ = "/usr/sbin/dnsmasq"

VIP4, VIP6 = "10.50.200.10", "fd50:200::10"
# A second VIP whose service shares web's backends, address and port alike.
VIP4B = "10.50.201.10"
CLIENT4, CLIENT6 = "10.50.0.2", "fd50::2"
GW4, GW6 = "10.50.0.1", "fd50::1"
# The outer sources of IPIP over IPv4 vary per flow within this prefix (not the segment's: no
# host answers for them, and none needs to).
ENCAP_PREFIX = "10.51.0.0/28"
ENCAP_SOURCE = "10.51.0.1"
BACKENDS4 = ["10.50.0.11", "10.50.0.12", "10.50.0.13"]
BACKENDS6 = ["fd50::11", "fd50::12", "fd50::13"]
NAMES = ["be-a", "be-b", "be-c"]
HTTP, DNS = 80, 53
BIG_BYTES = 3 * 1024 * 1024  # the long transfer: the same file on every backend

# `n` kept-alive HTTP connections to vip:80 from one process: it prints the backend name each
# answered GET /name with, waits for a line on stdin, then asks on every connection `rounds` times
# more, printing a line of names each round.
KEEPALIVE_CLIENT = r"""
import socket, sys
vip, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
family = socket.AF_INET6 if ":" in vip else socket.AF_INET
conns = []
for _ in range(n):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect((vip, 80))
    conns.append([s, b""])
def ask(c):
    c[0].sendall(b"GET /name HTTP/1.1\r\nHost: dsr\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += c[0].recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(body) < length:
        body += c[0].recv(4096)
    return body.decode().strip()
first = [ask(c) for c in conns]
print(" ".join(first), flush=True)
sys.stdin.readline()
for _ in range(rounds):
    now = [ask(c) for c in conns]
    print(" ".join(now), flush=True)
"""

NGINX_CONF = """
worker_processes 1;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log {dir}/access.log;
  client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi; uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
  keepalive_timeout 30;
  server {{
    listen 80; listen [::]:80;
    location = /name {{ default_type text/plain; return 200 "{name}\\n"; }}
    location / {{ root {dir}/www; }}
  }}
}}
"""


class DsrLab:
    """client (c0), gateway (g0), backends (b0 each) on bridge br0; `decap`: ferry-decap attached
    on every backend's NIC (the test of what happens without it passes False)."""

    def __init__(self, w, decap=True):
        self.w = w
        self.spaces = []
        self.procs = []
        self.big_sha256 = None
        try:
            self.sw = self.space("dsw")
            self.sw.ip("link", "add", "br0", "type", "bridge")
            self.sw.ip("link", "set", "br0", "up")
            self.client = self.space("dcl")
            self.gw = self.space("dgw")
            self.backends = [self.space(f"db{i}") for i in range(len(NAMES))]
            self.attach(self.client, "c0", "pc", [f"{CLIENT4}/24", f"{CLIENT6}/64"])
            self.attach(self.gw, "g0", "pg", [f"{GW4}/24", f"{GW6}/64"], queues=2)
            for i, ns in enumerate(self.backends):
                self.attach(ns, "b0", f"pb{i}", [f"{BACKENDS4[i]}/24", f"{BACKENDS6[i]}/64"])
                ns.add_addresses("lo", f"{VIP4}/32", f"{VIP4B}/32", f"{VIP6}/128")
                # A backend of direct server return: never answers ARP for the VIP it holds on lo,
                # and takes packets whose source (the client) it would not route back that way.
                for knob in ("net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2",
                             "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.b0.rp_filter=0"):
                    ns.run("sysctl", "-qw", knob)
            self.client.ip("route", "add", f"{VIP4}/32", "via", GW4)
            self.client.ip("route", "add", f"{VIP4B}/32", "via", GW4)
            self.client.ip("-6", "route", "add", f"{VIP6}/128", "via", GW6)
            if decap:
                for ns in self.backends:
                    self.decap(ns, "attach", "b0")
            # What real hosts send: every veth keeps transmit checksum offload on (its default), so
            # the client's and the backends' UDP and TCP leave with partial checksums.
            for ns, ifname in ((self.client, "c0"), (self.gw, "g0"),
                               *((b, "b0") for b in self.backends)):
                state = ns.run(sys.executable, "-c", TX_CSUM, ifname).stdout.strip()
                check_eq(state, "1", f"transmit checksum offload of {ifname} (the veth default)")
        except Exception:
            self.close()
            raise

    def space(self, tag):
        ns = Netns(tag, ipv6=True)
        self.spaces.append(ns)
        ns.run("sysctl", "-qw", "net.ipv6.conf.default.router_solicitations=0")
        return ns

    def attach(self, ns, ifname, port, cidrs, queues=1):
        veth(ns, ifname, self.sw, port, queues=queues)
        self.sw.ip("link", "set", port, "master", "br0")
        ns.add_addresses(ifname, *cidrs)

    def pin_dir(self, ns):
        return self.w.file(f"bpf-{ns.name}")  # not a bpffs: ferry-decap mounts one

    def decap(self, ns, *args, check_rc=True):
        """ferry-decap in a backend's network namespace; nsenter keeps this process's mount
        namespace, so the bpffs ferry-decap mounts (and the link pinned there) outlives it."""
        r = subprocess.run(["nsenter", f"--net=/run/netns/{ns.name}", DECAP, *args, "--pin-dir",
                            self.pin_dir(ns)], capture_output=True, text=True, timeout=30)
        if check_rc:
            check_eq(r.returncode, 0, f"ferry-decap {' '.join(args)} in {ns.name}: {r.stdout}{r.stderr}")
        return r

    def decap_status(self, ns):
        return json.loads(self.decap(ns, "status", "--json").stdout)

    def start_servers(self):
        data = os.urandom(BIG_BYTES)
        self.big_sha256 = hashlib.sha256(data).hexdigest()
        for name, ns, a4, a6 in zip(NAMES, self.backends, BACKENDS4, BACKENDS6):
            home = self.w.file(f"{name}-nginx")
            os.makedirs(os.path.join(home, "www"), exist_ok=True)
            with open(os.path.join(home, "www", "big"), "wb") as f:
                f.write(data)
            conf = os.path.join(home, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(dir=home, vip4=VIP4, vip6=VIP6, name=name))
            self.spawn(ns, f"{name}-nginx", NGINX, "-p", home, "-e", f"{home}/error.log", "-c",
                       conf, "-g", "daemon off;")
            log = self.w.file(f"{name}-dnsmasq.log")
            open(log, "w").close()
            self.spawn(ns, f"{name}-dnsmasq", DNSMASQ, "--keep-in-foreground",
                       "--conf-file=/dev/null", "--pid-file=", "--user=root", "--group=root",
                       "--no-resolv", "--no-hosts", "--no-poll", "--bind-interfaces",
                       f"--listen-address={VIP4}", f"--listen-address={VIP6}", f"--port={DNS}",
                       "--local=/example.test/", f"--txt-record=who.example.test,{name}",
                       "--edns-packet-max=4096",
                       "--log-queries", f"--log-facility={log}")

        def listening():
            for p, what in self.procs:
                if p.poll() is not None:
                    raise TestFailure(f"{what} exited with {p.returncode}: "
                                      f"{open(self.w.file(what + '.out')).read()}")
            for ns in self.backends:
                out = ns.run("ss", "-H", "-ulnt").stdout
                for addr in (f"0.0.0.0:{HTTP} ", f"[::]:{HTTP} ", f"{VIP4}:{DNS} ",
                             f"[{VIP6}]:{DNS} "):
                    if addr not in out:
                        return False
            return True
        wait_until(listening, 20, "nginx and dnsmasq listening on the VIPs of every backend",
                   interval=0.1)

    def spawn(self, ns, what, *argv):
        out = open(self.w.file(f"{what}.out"), "w")
        p = subprocess.Popen(["ip", "netns", "exec", ns.name, *argv], stdout=out,
                             stderr=subprocess.STDOUT)
        out.close()
        self.procs.append((p, what))
        return p

    def curl(self, vip, path, timeout=20, extra=()):
        """One HTTP GET from the client: (status code, body bytes)."""
        host = f"[{vip}]" if ":" in vip else vip
        r = subprocess.run(["ip", "netns", "exec", self.client.name, "curl", "-sS", "-g",
                            "--max-time", str(timeout), "-o", "-", "-w", "\n%{http_code}",
                            *extra, f"http://{host}:{HTTP}{path}"], capture_output=True)
        if r.returncode != 0:
            raise TestFailure(f"curl {path} via {vip}: exit {r.returncode}: {r.stderr.decode()}")
        body, _, code = r.stdout.rpartition(b"\n")
        return int(code), body

    def keepalive_clients(self, vip, n, rounds):
        """KEEPALIVE_CLIENT in the client's namespace, its stdin and stdout pipes of text."""
        return subprocess.Popen(["ip", "netns", "exec", self.client.name, sys.executable, "-u",
                                 "-c", KEEPALIVE_CLIENT, vip, str(n), str(rounds)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def queries_by_backend(self):
        out = {}
        for name in NAMES:
            with open(self.w.file(f"{name}-dnsmasq.log")) as f:
                out[name] = sum(" query[" in line for line in f)
        return out

    def close(self):
        for p, _ in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for ns in self.backends if hasattr(self, "backends") else []:
            with contextlib.suppress(Exception):
                for pid in sh("ip", "netns", "pids", ns.name, check=False).stdout.split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), 9)
        for ns in self.backends if hasattr(self, "backends") else []:
            subprocess.run(["umount", "-l", self.pin_dir(ns)], capture_output=True)
        end_all([], self.spaces)


def dsr_config(w, services=None, encap=None, web_backends=3):
    """ferryd on the lab's gateway (g0, two queues): by default web (TCP, ipip) and dns (UDP+TCP,
    gue) on VIP4, web2 (TCP, gue) on VIP4B with web's very backends, web6 (gue) and dns6 (ipip)
    on VIP6, each to the three backends (web to the first `web_backends` of them)."""
    def backends(port, v6):
        return [f"[{a}]:{port}" if v6 else f"{a}:{port}" for a in (BACKENDS6 if v6 else BACKENDS4)]
    if services is None:
        services = [
            {"name": "web", "vip": VIP4, "port": HTTP, "protocols": ["tcp"], "forwarding": "ipip",
             "backends": backends(HTTP, False)[:web_backends]},
            {"name": "dns", "vip": VIP4, "port": DNS, "protocols": ["udp", "tcp"],
             "forwarding": "gue", "backends": backends(DNS, False)},
            {"name": "web2", "vip": VIP4B, "port": HTTP, "protocols": ["tcp"],
             "forwarding": "gue", "backends": backends(HTTP, False)},
            {"name": "web6", "vip": VIP6, "port": HTTP, "protocols": ["tcp"], "forwarding": "gue",
             "backends": backends(HTTP, True)},
            {"name": "dns6", "vip": VIP6, "port": DNS, "protocols": ["udp", "tcp"],
             "forwarding": "ipip", "backends": backends(DNS, True)},
        ]
    return base_config(w, xdp={
        "interfaces": [{"name": "g0"}],
        "umem": {"frames": 4096, "frame_bytes": 4096},
        "rings": {"fill": 512, "completion": 512, "rx": 512, "tx": 512},
        "encap": encap or {"source": ENCAP_SOURCE, "source_prefix": ENCAP_PREFIX,
                           "source6": GW6, "gue_port": 6080},
    }, services=services)
