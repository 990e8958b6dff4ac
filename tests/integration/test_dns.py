"""Real DNS software end to end through ferry. Three namespaces: client -- ferry gateway (two
2-queue veth ports) -- backends (three dnsmasq, each on one IPv4 and one IPv6 address), IPv6 on
and every veth with its default offloads, so the local stacks hand ferry UDP that carries only
the pseudo-header sum (CHECKSUM_PARTIAL) and ferry has to finish it. ferryd serves one DNS
service per family on port 53, UDP on the AF_XDP fast path and TCP on the io_uring proxy. dig's
very first query from a client address the gateway has never seen is answered (one try, 2 s),
dig +tcp is answered through the proxy, dnsperf at a fixed rate loses nothing on either VIP,
all three dnsmasq serve, no receiver counts a bad UDP checksum and ferry's workers drop
nothing."""
import contextlib
import json
import os
import re
import subprocess
import sys
import time

from fastpath_lab import TX_CSUM, by_label, total, udp_snmp
from harness import TestFailure, base_config, check, check_eq, running, wait_until
from netns import Netns, sh, veth

DNSMASQ = "/usr/sbin/dnsmasq"
PORT = 53
VIP4, VIP6 = "10.53.100.53", "fd53:100::53"
# The client's own addresses: the primary one (TCP and dnsperf) and the fresh ones, each used for
# exactly one first query.
CLIENT4, CLIENT6 = "10.53.1.2", "fd53:1::2"
FRESH4 = ["10.53.1.11", "10.53.1.12"]
FRESH6 = ["fd53:1::11", "fd53:1::12"]
# Fresh addresses for the first-burst test, and its sizes (the figures the issue measured loss on).
BURST = [("10.53.1.21", VIP4, 600), ("fd53:1::21", VIP6, 300)]
GW_CLIENT4, GW_CLIENT6 = "10.53.1.1", "fd53:1::1"
GW_BACK4, GW_BACK6 = "10.53.2.1", "fd53:2::1"
BACKENDS4 = ["10.53.2.2", "10.53.2.3", "10.53.2.4"]
BACKENDS6 = ["fd53:2::2", "fd53:2::3", "fd53:2::4"]
NAMES = ["dns-a", "dns-b", "dns-c"]  # what each backend answers for who.example.test TXT
QUERIES = "who.example.test TXT\nwww.example.test A\nwww.example.test AAAA\n"

DNSPERF_QPS = 2000
DNSPERF_SECONDS = 5
DNSPERF_CLIENTS = 32  # sockets (source ports): Maglev hashes the 5-tuple, so all 3 backends get some

def udp_counters(ns, field):
    """{udp4, udp6} of one UDP counter of the namespace's stack (InCsumErrors, RcvbufErrors...)."""
    v4 = udp_snmp(ns)[field]
    snmp6 = dict(l.split()[:2] for l in ns.run("cat", "/proc/net/snmp6").stdout.splitlines() if l.strip())
    return {"udp4": v4, "udp6": int(snmp6["Udp6" + field])}


def udp_csum_errors(ns):
    return udp_counters(ns, "InCsumErrors")


class DnsLab:
    """client (c0) -- (g0) gateway (g1) -- (b0) backends; two queues on every veth, IPv6 on,
    default offloads, VIPs on the gateway's lo (the TCP proxy listens on them; XDP takes UDP to
    them before the kernel sees it), and a dnsmasq per backend address pair."""

    def __init__(self, w):
        self.w = w
        self.spaces = []
        self.dnsmasq = []
        try:
            self.client, self.gw, self.back = (self.space(t) for t in ("dnsc", "dnsg", "dnsb"))
            veth(self.client, "c0", self.gw, "g0", queues=2)
            veth(self.gw, "g1", self.back, "b0", queues=2)
            self.client.add_addresses("c0", f"{CLIENT4}/24", f"{CLIENT6}/64",
                                      *(f"{a}/24" for a in FRESH4), *(f"{a}/64" for a in FRESH6),
                                      *(f"{a}/{64 if ':' in a else 24}" for a, _, _ in BURST))
            self.gw.add_addresses("g0", f"{GW_CLIENT4}/24", f"{GW_CLIENT6}/64")
            self.gw.add_addresses("g1", f"{GW_BACK4}/24", f"{GW_BACK6}/64")
            self.gw.add_addresses("lo", f"{VIP4}/32", f"{VIP6}/128")
            self.back.add_addresses("b0", *(f"{a}/24" for a in BACKENDS4), *(f"{a}/64" for a in BACKENDS6))
            self.client.ip("route", "add", "default", "via", GW_CLIENT4)
            self.client.ip("-6", "route", "add", "default", "via", GW_CLIENT6)
            self.back.ip("route", "add", "default", "via", GW_BACK4)
            self.back.ip("-6", "route", "add", "default", "via", GW_BACK6)
            for ns, ifname in ((self.client, "c0"), (self.gw, "g0"), (self.gw, "g1"), (self.back, "b0")):
                state = ns.run(sys.executable, "-c", TX_CSUM, ifname).stdout.strip()
                check_eq(state, "1", f"transmit checksum offload of {ifname} (the veth default)")
        except Exception:
            self.close()
            raise

    def space(self, tag):
        ns = Netns(tag, ipv6=True)
        self.spaces.append(ns)
        return ns

    def start_dnsmasq(self, extra=()):
        for name, a4, a6 in zip(NAMES, BACKENDS4, BACKENDS6):
            log = self.w.file(f"{name}.log")
            open(log, "w").close()
            args = [DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null", "--pid-file=",
                    "--user=root", "--group=root", "--no-resolv", "--no-hosts", "--no-poll",
                    "--bind-interfaces", f"--listen-address={a4}", f"--listen-address={a6}",
                    f"--port={PORT}", "--local=/example.test/", f"--txt-record=who.example.test,{name}",
                    f"--host-record=www.example.test,192.0.2.{len(self.dnsmasq) + 1},"
                    f"2001:db8::{len(self.dnsmasq) + 1}",
                    "--log-queries", f"--log-facility={log}", *extra]
            out = open(self.w.file(f"{name}.out"), "w")
            p = subprocess.Popen(["ip", "netns", "exec", self.back.name, *args], stdout=out,
                                 stderr=subprocess.STDOUT)
            out.close()
            self.dnsmasq.append((name, a4, a6, p, log))

        def listening():
            for name, a4, a6, p, _ in self.dnsmasq:
                if p.poll() is not None:
                    raise TestFailure(f"dnsmasq {name} exited with {p.returncode}: "
                                      f"{open(self.w.file(name + '.out')).read()}")
            out = self.back.run("ss", "-H", "-ulnt").stdout
            return all(f"{a4}:{PORT} " in out and f"[{a6}]:{PORT} " in out for _, a4, a6, _, _ in self.dnsmasq)
        wait_until(listening, 15, "dnsmasq listening on every backend address (UDP and TCP)", interval=0.1)
        # Each dnsmasq answers its own name when asked directly, from inside the backends'
        # namespace (lo: no veth, no gateway, no neighbour cache involved).
        for name, a4, a6, _, _ in self.dnsmasq:
            for server in (a4, a6):
                res = dig(self.back, server, None, "who.example.test", "TXT")
                check_eq((res["status"], res["answers"]), ("NOERROR", [name]),
                         f"dnsmasq {name} asked directly at {server}")

    def queries_by_backend(self):
        """{backend name: queries its dnsmasq logged so far}."""
        out = {}
        for name, _, _, _, log in self.dnsmasq:
            with open(log) as f:
                out[name] = sum(" query[" in line for line in f)
        return out

    def close(self):
        for _, _, _, p, _ in self.dnsmasq:
            if p.poll() is None:
                p.kill()
            p.wait()
        # dnsmasq forks a child per TCP connection; any still alive is ours, in our namespace.
        with contextlib.suppress(Exception):
            for pid in sh("ip", "netns", "pids", self.back.name, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
        for ns in self.spaces:
            ns.close()


def dig(ns, server, source, name, rtype, tcp=False, time_s=2):
    """One dig query: {"rc", "status", "answers" (TXT strings or addresses), "ms", "wall_ms",
    "server", "output"}."""
    args = ["timeout", "20", "dig", f"@{server}", "-p", str(PORT), name, rtype, "+tries=1",
            f"+time={time_s}"]
    if source:
        args += ["-b", source]
    if tcp:
        args.append("+tcp")
    started = time.monotonic()
    r = ns.run(*args, check=False)
    wall_ms = round((time.monotonic() - started) * 1000)
    status = re.search(r"status: (\w+)", r.stdout)
    qtime = re.search(r";; Query time: (\d+) msec", r.stdout)
    served = re.search(r";; SERVER: (.+)", r.stdout)
    answers = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5 and not line.startswith(";") and parts[2] == "IN" and parts[3] == rtype:
            answers.append(" ".join(parts[4:]).strip('"'))
    return {"rc": r.returncode, "status": status.group(1) if status else None, "answers": answers,
            "ms": int(qtime.group(1)) if qtime else None, "wall_ms": wall_ms,
            "server": served.group(1) if served else None, "output": r.stdout + r.stderr}


def dns_config(w):
    return base_config(w, xdp={
        "interfaces": [{"name": "g0"}, {"name": "g1"}],
        "umem": {"frames": 4096, "frame_bytes": 4096},
        "rings": {"fill": 512, "completion": 512, "rx": 512, "tx": 512},
    }, services=[
        {"name": "dns4", "vip": VIP4, "port": PORT, "protocols": ["udp", "tcp"], "balance": "maglev",
         "backends": [f"{a}:{PORT}" for a in BACKENDS4]},
        {"name": "dns6", "vip": VIP6, "port": PORT, "protocols": ["udp", "tcp"], "balance": "maglev",
         "backends": [f"[{a}]:{PORT}" for a in BACKENDS6]},
    ])


def drops_by_reason(d):
    """{reason: frames} of ferry_xsk_drops_total."""
    return by_label(d, "ferry_xsk_drops_total", "reason")


def kernel_drops(d):
    return by_label(d, "ferry_xsk_kernel_drops_total", "reason")


def fastpath_figures(d):
    """Counters that say where UDP went: XDP matches per service, frames the workers sent per
    interface, next-hop resolutions the workers asked for, and frames held for a next hop and
    released (summed over workers and queues)."""
    out = {}
    for family, label, key in (("ferry_xdp_service_packets_total", "service", "xdp_matched"),
                               ("ferry_xsk_tx_packets_total", "iface", "tx"),
                               ("ferry_xsk_resolution_requests_total", "result", "resolution")):
        out.update({f"{key}[{v}]": n for v, n in by_label(d, family, label).items()})
    for family in ("ferry_xsk_neighbour_held_total", "ferry_xsk_neighbour_released_total"):
        out[family] = total(d, family)
    return out


def diff(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(after) | set(before))}


def neighbour(ns, addr, dev):
    """The gateway's neighbour entry for `addr` on `dev` ('' when there is none)."""
    return ns.ip("neigh", "show", "to", addr, "dev", dev).stdout.strip()


def checksum_report(lab):
    return {"client": udp_csum_errors(lab.client), "backends": udp_csum_errors(lab.back)}


@contextlib.contextmanager
def serving(w):
    """The lab with its dnsmasq backends and ferryd in the gateway, traffic from the moment
    ferryd is ready (its resolution of the backends' MACs may still be under way: a query that
    meets an unresolved backend waits in the hold queue): yields (lab, daemon); removes
    everything after."""
    lab = DnsLab(w)
    try:
        lab.start_dnsmasq()
        with running(w, dns_config(w), netns=lab.gw.name) as d:
            yield lab, d
    finally:
        lab.close()


def test_first_udp_query_of_a_new_client_is_answered(workdir):
    """dig, one try with a 2 s timeout, from client addresses the gateway has never seen (no
    ping, no static neighbours, nothing sent before): the first case of each family is also the
    client namespace's first packet towards the gateway; the second a fresh address of a host the
    gateway link already carries."""
    with serving(workdir) as (lab, d):
        results = []
        for vip, sources in ((VIP4, FRESH4), (VIP6, FRESH6)):
            for i, src in enumerate(sources):
                check_eq(neighbour(lab.gw, src, "g0"), "", f"the gateway knows nothing of {src} before")
                client_knew_gw = neighbour(lab.client, GW_CLIENT4 if vip == VIP4 else GW_CLIENT6, "c0")
                before = lab.queries_by_backend()
                res = dig(lab.client, vip, src, "who.example.test", "TXT")
                served = [n for n, c in diff(lab.queries_by_backend(), before).items() if c]
                kind = "new host" if i == 0 else "new address of a known host"
                print(f"first UDP query {src} -> {vip} ({kind}; client knew the gateway: "
                      f"{'yes' if client_knew_gw else 'no'}): rc {res['rc']} status {res['status']} "
                      f"answer {res['answers']} query time {res['ms']} ms, wall {res['wall_ms']} ms, "
                      f"backend log {served}, gateway neighbour now: "
                      f"{neighbour(lab.gw, src, 'g0') or '-'}", flush=True)
                results.append((src, vip, res, served))
        drops = drops_by_reason(d)
        csums = checksum_report(lab)
        print(f"ferry drops by reason: {drops}; kernel AF_XDP drops: {kernel_drops(d)}; "
              f"fast path: {fastpath_figures(d)}; UDP checksum errors: {csums}", flush=True)
        for src, vip, res, served in results:
            check(res["rc"] == 0 and res["status"] == "NOERROR" and len(res["answers"]) == 1
                  and res["answers"][0] in NAMES,
                  f"the first query from {src} to {vip} was answered (one try, 2 s): "
                  f"{res['output'].strip()[-400:]}")
            check_eq(res["server"], f"{vip}#{PORT}({vip}) (UDP)", f"answer to {src} came from the VIP over UDP")
            check_eq(served, [res["answers"][0]], f"the backend that answered {src} logged it")
        check_eq(sum(drops.values()), 0, f"ferry dropped nothing: {drops}")
        check_eq(csums, {"client": {"udp4": 0, "udp6": 0}, "backends": {"udp4": 0, "udp6": 0}},
                 "no receiver saw a bad UDP checksum")


# Sends `count` DNS queries (TXT who.example.test) from `source` to `vip` as fast as it can, over
# 30 sockets (30 flows, spread by Maglev), then waits until every one is answered or 3 s pass
# without a new answer; prints {"sent", "answered", "first_answer_ms", "last_answer_ms"}.
BURST_SCRIPT = r"""
import json, selectors, socket, struct, sys, time
source, vip, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
family = socket.AF_INET6 if ":" in vip else socket.AF_INET
sel = selectors.DefaultSelector()
socks = []
for i in range(30):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((source, 0)); s.setblocking(False); sel.register(s, selectors.EVENT_READ); socks.append(s)
qname = b"".join(bytes([len(l)]) + l for l in b"who.example.test".split(b".")) + b"\0"
start = time.monotonic()
for q in range(count):
    socks[q % 30].sendto(struct.pack("!HHHHHH", q, 0x0100, 1, 0, 0, 0) + qname + b"\0\x10\0\x01",
                         (vip, 53))
answered, times, last = set(), [], time.monotonic()
while len(answered) < count and time.monotonic() - last < 3:
    for key, _ in sel.select(timeout=0.1):
        while True:
            try:
                data = key.fileobj.recv(2048)
            except BlockingIOError:
                break
            qid = struct.unpack("!H", data[:2])[0]
            if qid not in answered:
                answered.add(qid); times.append(time.monotonic() - start); last = time.monotonic()
print(json.dumps({"sent": count, "answered": len(answered),
                  "first_answer_ms": round(min(times) * 1000, 1) if times else None,
                  "last_answer_ms": round(max(times) * 1000, 1) if times else None}))
"""


def test_first_burst_of_a_new_client_is_answered_in_full(workdir):
    """A client host the gateway already carries sends its first burst from a new address (600
    IPv4 datagrams, 300 IPv6, as fast as it can): the gateway has no MAC for it when the first
    answers come back from the backends, and holds them until it has, so every query is answered
    (with drop-on-miss a third to nearly all of such a burst was lost)."""
    with serving(workdir) as (lab, d):
        results = []
        for source, vip, count in BURST:
            # The client host knows the gateway already (its main address asked before).
            main = CLIENT6 if ":" in vip else CLIENT4
            check_eq(dig(lab.client, vip, main, "who.example.test", "TXT")["status"], "NOERROR",
                     f"a query from {main} first")
            check_eq(neighbour(lab.gw, source, "g0"), "", f"the gateway knows nothing of {source}")
            def overflows():
                # Datagrams lost outside ferry, each counted by the kernel that lost it: the
                # endpoints' own sockets without room (a burst of 600 in a few ms can overrun
                # dnsmasq's 208 KB receive buffer when it is scheduled out), and the lab's wire
                # (a veth whose peer's ring or backlog is full counts a drop, as a NIC would).
                out = {side: sum(udp_counters(ns, "RcvbufErrors").values())
                       for side, ns in (("client socket", lab.client), ("backend sockets", lab.back))}
                for ns in (lab.client, lab.gw, lab.back):
                    for link in json.loads(ns.ip("-s", "-j", "link", "show", "type", "veth").stdout):
                        st = link["stats64"]
                        out[f"veth {link['ifname']}"] = st["tx"]["dropped"] + st["rx"]["dropped"]
                return out
            held0, drops0, kdrops0, over0 = (total(d, "ferry_xsk_neighbour_held_total"),
                                             drops_by_reason(d), kernel_drops(d), overflows())
            r = lab.client.run("timeout", "60", sys.executable, "-c", BURST_SCRIPT, source, vip,
                               str(count), check=False)
            check_eq(r.returncode, 0, f"burst from {source}: {r.stderr}")
            res = json.loads(r.stdout)
            held = total(d, "ferry_xsk_neighbour_held_total") - held0
            drops, kdrops, over = (diff(drops_by_reason(d), drops0), diff(kernel_drops(d), kdrops0),
                                   diff(overflows(), over0))
            print(f"first burst {source} -> {vip}: {res}; ferry held {held:.0f} frames for the "
                  f"new next hop; ferry drops {drops}, AF_XDP kernel drops {kdrops}; lost outside "
                  f"ferry {over}", flush=True)
            results.append((source, res, drops, kdrops, over))
        for source, res, drops, kdrops, over in results:
            check_eq(sum(drops.values()), 0, f"ferry dropped nothing of {source}'s burst: {drops}")
            check_eq(sum(kdrops.values()), 0, f"nor did its AF_XDP sockets: {kdrops}")
            # Every query answered, but for what the endpoints' sockets and the veths lost (counted
            # by their kernels, not by ferry): anything else lost is unexplained and fails.
            check_eq(res["answered"] + sum(over.values()), res["sent"],
                     f"every query of {source}'s first burst answered, but for the losses the "
                     f"endpoints' sockets and the veths counted ({over})")
        check_eq(checksum_report(lab),
                 {"client": {"udp4": 0, "udp6": 0}, "backends": {"udp4": 0, "udp6": 0}},
                 "no receiver saw a bad UDP checksum")


def test_tcp_queries_are_proxied(workdir):
    """dig +tcp to both VIPs: answered by a backend through ferry's io_uring proxy."""
    with serving(workdir) as (lab, d):
        for vip, src, service in ((VIP4, CLIENT4, "dns4"), (VIP6, CLIENT6, "dns6")):
            before = total(d, "ferry_proxy_connections_total", service=service)
            res = dig(lab.client, vip, src, "who.example.test", "TXT", tcp=True, time_s=3)
            conns = total(d, "ferry_proxy_connections_total", service=service) - before
            print(f"TCP query {src} -> {vip}: rc {res['rc']} status {res['status']} answer "
                  f"{res['answers']} query time {res['ms']} ms, wall {res['wall_ms']} ms, "
                  f"proxied connections of {service}: {conns}", flush=True)
            check(res["rc"] == 0 and res["status"] == "NOERROR" and len(res["answers"]) == 1
                  and res["answers"][0] in NAMES, f"TCP query to {vip}: {res['output'].strip()[-400:]}")
            check_eq(res["server"], f"{vip}#{PORT}({vip}) (TCP)", f"answer from {vip} over TCP")
            check_eq(conns, 1, f"one connection through the proxy service {service}")
            res = dig(lab.client, vip, src, "www.example.test", "AAAA" if ":" in vip else "A",
                      tcp=True, time_s=3)
            check(res["rc"] == 0 and res["status"] == "NOERROR" and len(res["answers"]) == 1,
                  f"TCP address query to {vip}: {res['output'].strip()[-400:]}")


def dnsperf(lab, w, vip, src, port=PORT, seconds=DNSPERF_SECONDS, qps=DNSPERF_QPS,
            clients=DNSPERF_CLIENTS):
    """dnsperf from the lab's client at `qps` for `seconds`: {"sent", "completed", "lost",
    "qps", "codes"}."""
    qfile = w.file("queries.txt")
    with open(qfile, "w") as f:
        f.write(QUERIES)
    r = lab.client.run("timeout", str(seconds + 30), "dnsperf", "-s", vip, "-p", str(port),
                       "-a", src, "-d", qfile, "-l", str(seconds), "-Q", str(qps),
                       "-t", "1", "-c", str(clients), "-T", "1", "-q", "200", check=False)
    check_eq(r.returncode, 0, f"dnsperf against {vip}: {r.stdout} {r.stderr}")
    fig = {}
    for key, pattern in (("sent", r"Queries sent:\s+(\d+)"), ("completed", r"Queries completed:\s+(\d+)"),
                         ("lost", r"Queries lost:\s+(\d+)"), ("qps", r"Queries per second:\s+([\d.]+)")):
        m = re.search(pattern, r.stdout)
        check(m is not None, f"dnsperf's '{key}' figure in: {r.stdout}")
        fig[key] = float(m.group(1)) if key == "qps" else int(m.group(1))
    codes = re.search(r"Response codes:\s+(.*)", r.stdout)
    fig["codes"] = codes.group(1).strip() if codes else ""
    return fig


def test_dnsperf_loses_nothing_and_every_backend_serves(workdir):
    """dnsperf at a fixed rate against each VIP: every query answered, NOERROR, all three
    dnsmasq served, no checksum errors, and ferry's workers dropped nothing meanwhile."""
    with serving(workdir) as (lab, d):
        failures = []
        for vip, src in ((VIP4, CLIENT4), (VIP6, CLIENT6)):
            drops0, kdrops0, csum0 = drops_by_reason(d), kernel_drops(d), checksum_report(lab)
            fp0 = fastpath_figures(d)
            logged0 = lab.queries_by_backend()
            fig = dnsperf(lab, workdir, vip, src)
            # dnsmasq logs a query as it answers it: await every completed one in the logs.
            wait_until(lambda: sum(diff(lab.queries_by_backend(), logged0).values())
                       >= fig["completed"], 10, "dnsmasq's log lines of the answered queries")
            served = diff(lab.queries_by_backend(), logged0)
            drops = diff(drops_by_reason(d), drops0)
            kdrops = diff(kernel_drops(d), kdrops0)
            fp = diff(fastpath_figures(d), fp0)
            csum1 = checksum_report(lab)
            csums = {side: diff(csum1[side], csum0[side]) for side in csum1}
            print(f"dnsperf {src} -> {vip}, {DNSPERF_QPS} qps for {DNSPERF_SECONDS} s, "
                  f"{DNSPERF_CLIENTS} clients: sent {fig['sent']} completed {fig['completed']} "
                  f"lost {fig['lost']} qps {fig['qps']} codes [{fig['codes']}]; queries per backend "
                  f"{served} (sum {sum(served.values())}); ferry drops {drops}; kernel AF_XDP "
                  f"drops {kdrops}; fast path {fp}; UDP checksum errors {csums}", flush=True)
            if fig["lost"] != 0 or fig["completed"] != fig["sent"] or fig["sent"] == 0:
                failures.append(f"{vip}: {fig['lost']} of {fig['sent']} queries lost")
            if fig["completed"] and not re.fullmatch(r"NOERROR \d+ \(100\.00%\)", fig["codes"]):
                failures.append(f"{vip}: response codes {fig['codes']}")
            if not all(served.get(n, 0) > 0 for n in NAMES):
                failures.append(f"{vip}: not every backend served: {served}")
            if sum(drops.values()) != 0:
                failures.append(f"{vip}: ferry dropped {drops}")
            if any(v for side in csums.values() for v in side.values()):
                failures.append(f"{vip}: UDP checksum errors {csums}")
            service = "dns6" if ":" in vip else "dns4"
            if fp.get(f"xdp_matched[{service}]", 0) < fig["sent"] + fig["completed"]:
                failures.append(f"{vip}: XDP matched {fp.get(f'xdp_matched[{service}]', 0)} frames of "
                                f"{service}, fewer than the {fig['sent']} queries and "
                                f"{fig['completed']} answers")
        print(f"ferry drops by reason at the end: {drops_by_reason(d)}", flush=True)
        check(not failures, "; ".join(failures))
