"""ferry as a complete IP hop for UDP, with real software on both sides. The DNS lab of
test_dns.py (client -- ferry gateway, two 2-queue veth ports -- three dnsmasq, IPv4 and IPv6,
default offloads) plus a routed prefix behind the backends:

* a TXT answer of over 3,000 bytes (dig +bufsize=4096, UDP only): the backends' stack fragments
  it and every fragment reaches the client translated, IPv4 and IPv6;
* a query of 3,000 bytes (EDNS padding): the client's stack fragments it, the fragments reach a
  backend, the answer comes back;
* the backend link at MTU 1,400 and a client sending 1,450-byte queries with DF: the client's
  kernel learns 1,400 from ferry's fragmentation needed / packet too big (its route cache and the
  socket's IP_MTU say so) and its smaller retry is answered; without DF, IPv4 fragments too big
  for that link are cut again by ferry;
* every dnsmasq stopped: dig fails at once with "connection refused" (the backends' port
  unreachable, translated to come from the VIP);
* tracepath through a VIP and through a routed prefix shows the gateway as the first hop (its
  time exceeded)."""
import contextlib
import json
import re
import sys
import time

from harness import check, check_eq, running, wait_until
from test_dns import (BACKENDS4, CLIENT4, CLIENT6, GW_CLIENT4, PORT, VIP4, VIP6, DnsLab, dig,
                      dns_config, drops_by_reason)
from fastpath_lab import total

BIG_NAME = "big.example.test"
# 14 strings of 250 characters: an answer of about 3,600 bytes.
BIG_STRINGS = [chr(ord("a") + i) * 250 for i in range(14)]
ROUTED4 = "10.53.3.0/24"
SINK4 = "10.53.3.5"
SMALL_MTU = 1400

# `tries` DNS queries for who.example.test TXT padded (EDNS0 padding, RFC 7830) to exactly `size`
# bytes, from a socket with path MTU discovery on (DF) or, with a fourth argument "fragment", off
# (larger queries leave in fragments); prints {"sent", "errors", "mtu", "answered"}.
DF_QUERY = r"""
import json, socket, struct, sys
family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
server, size, tries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pmtu = 0 if sys.argv[4:] == ["fragment"] else 2  # IP(V6)_PMTUDISC_DONT or _DO
def query(size, qid):
    name = b"".join(bytes([len(p)]) + p.encode() for p in "who.example.test".split(".")) + b"\0"
    head = struct.pack("!6H", qid, 0x0100, 1, 0, 0, 1) + name + struct.pack("!2H", 16, 1)
    pad = size - len(head) - 11 - 4
    opt = b"\0" + struct.pack("!HHIH", 41, 4096, 0, 4 + pad) + struct.pack("!HH", 12, pad) + b"\0" * pad
    return head + opt
s = socket.socket(family, socket.SOCK_DGRAM)
if family == socket.AF_INET:
    s.setsockopt(socket.IPPROTO_IP, 10, pmtu)   # IP_MTU_DISCOVER
else:
    s.setsockopt(socket.IPPROTO_IPV6, 23, pmtu)  # IPV6_MTU_DISCOVER
s.connect((server, 53))
s.settimeout(1.0)
out = {"sent": [], "errors": [], "answered": 0, "mtu": None}
for i in range(tries):
    try:
        s.send(query(size, i + 1))
        out["sent"].append(size)
        s.recv(65535)
        out["answered"] += 1
    except OSError as e:
        out["errors"].append(e.strerror or str(e))
    try:
        out["mtu"] = s.getsockopt(socket.IPPROTO_IP if family == socket.AF_INET else socket.IPPROTO_IPV6,
                                  14 if family == socket.AF_INET else 24)  # IP_MTU / IPV6_MTU
    except OSError:
        pass
print(json.dumps(out))
"""


class IpHopLab(DnsLab):
    """The DNS lab with a big TXT record on every dnsmasq and a routed prefix behind the
    backends' namespace (SINK4 on its lo)."""

    def __init__(self, w):
        super().__init__(w)
        try:
            self.back.ip("addr", "add", f"{SINK4}/32", "dev", "lo")
            self.gw.ip("route", "add", ROUTED4, "via", BACKENDS4[0], "dev", "g1")
            self.gw.run("sysctl", "-qw", "net.ipv4.ip_forward=1")
        except Exception:
            self.close()
            raise

    def start(self):
        big = ",".join(BIG_STRINGS)
        self.start_dnsmasq(extra=[f"--txt-record={BIG_NAME},{big}", "--edns-packet-max=4096"])


@contextlib.contextmanager
def serving(w, backend_mtu=None):
    """The lab with dnsmasq serving (the backend link at `backend_mtu` if given) and ferryd in
    the gateway; everything removed after, also on failure."""
    lab = IpHopLab(w)
    try:
        lab.start()
        if backend_mtu:
            for ns, ifname in ((lab.gw, "g1"), (lab.back, "b0")):
                ns.ip("link", "set", ifname, "mtu", str(backend_mtu))
        with running(w, ip_hop_config(w), netns=lab.gw.name) as d:
            yield lab, d
    finally:
        lab.close()


def ip_hop_config(w):
    cfg = dns_config(w)
    cfg["routes"] = [{"prefix": ROUTED4, "via": "g1", "protocols": ["udp"]}]
    return cfg


def big_answer_ok(res, what):
    check_eq(res["status"], "NOERROR", f"{what}: {res['output'][-600:]}")
    joined = "".join(a.replace('" "', "") for a in res["answers"])
    check_eq(len(joined), sum(len(s) for s in BIG_STRINGS), f"{what}: TXT bytes answered")
    check("MSG SIZE  rcvd: 3" in res["output"], f"{what}: over 3,000 bytes ({res['output'][-200:]})")


def dig_args(server, source, *extra):
    return ["timeout", "20", "dig", f"@{server}", "-p", str(PORT), "-b", source, "+tries=1",
            "+time=2", "+notcp", "+ignore", *extra]


def test_fragmented_answers_and_queries_cross_both_ways(workdir):
    with serving(workdir) as (lab, d):
        for vip, src in ((VIP4, CLIENT4), (VIP6, CLIENT6)):
            for i in range(5):
                r = lab.client.run(*dig_args(vip, src, "+bufsize=4096", BIG_NAME, "TXT"),
                                   check=False)
                big_answer_ok(_parsed(r), f"{BIG_NAME} TXT via {vip}, try {i}")
            # Queries of 3,000 bytes: the client's stack sends each in fragments.
            r = lab.client.run("timeout", "20", sys.executable, "-c", DF_QUERY, vip, "3000", "5",
                               "fragment")
            out = json.loads(r.stdout)
            check_eq(out["answered"], 5, f"3,000-byte queries via {vip}: {out}")
        forwarded = total(d, "ferry_xsk_fragments_forwarded_total")
        check(forwarded >= 2 * 5 * 3 * 2, f"fragments forwarded: {forwarded}")
        drops = drops_by_reason(d)
        for reason in ("fragment_overlap", "fragment_duplicate", "fragment_timeout", "malformed",
                       "unexpected", "fragment_hold_full", "fragment_tiny"):
            check_eq(drops.get(reason, 0), 0, f"drops {reason} ({drops})")


def _parsed(r):
    status = re.search(r"status: (\w+)", r.stdout)
    answers = []
    for line in r.stdout.splitlines():
        parts = line.split(None, 4)
        if len(parts) == 5 and not line.startswith(";") and parts[3] == "TXT":
            answers.append(parts[4].strip('"'))
    return {"status": status.group(1) if status else None, "answers": answers,
            "output": r.stdout + r.stderr}


def test_a_df_client_learns_the_backend_links_mtu(workdir):
    with serving(workdir, backend_mtu=SMALL_MTU) as (lab, d):
        wait_until(lambda: all(v == SMALL_MTU for v in
                               [json.loads(lab.gw.ip("-j", "link", "show", "g1").stdout)[0]["mtu"]]),
                   5, "g1 at the small MTU")
        for vip in (VIP4, VIP6):
            r = lab.client.run("timeout", "20", sys.executable, "-c", DF_QUERY, vip, "1450", "3")
            out = json.loads(r.stdout)
            check_eq(out["mtu"], SMALL_MTU, f"{vip}: the socket's path MTU after 1,450-byte DF "
                     f"queries ({out})")
            route = lab.client.ip("route", "get", vip).stdout
            check(f"mtu {SMALL_MTU}" in route, f"{vip}: the client's route cache: {route}")
            r = lab.client.run("timeout", "20", sys.executable, "-c", DF_QUERY, vip, "1300", "1")
            out = json.loads(r.stdout)
            check_eq(out["answered"], 1, f"{vip}: a query that fits is answered ({out})")
        sent = total(d, "ferry_xsk_icmp_sent_total", kind="too_big")
        check(sent >= 2, f"fragmentation needed / packet too big sent: {sent}")
        # Without DF, a 3,000-byte query leaves the client in 1,500-byte fragments: IPv4 ones
        # are cut again to fit 1,400, as a router does; IPv6 has learnt 1,400 above.
        lab.client.ip("-4", "route", "flush", "cache")  # forget the 1,400 learnt above
        check("mtu" not in lab.client.ip("route", "get", VIP4).stdout, "IPv4 PMTU forgotten")
        for vip in (VIP4, VIP6):
            r = lab.client.run("timeout", "20", sys.executable, "-c", DF_QUERY, vip, "3000", "3",
                               "fragment")
            out = json.loads(r.stdout)
            check_eq(out["answered"], 3, f"3,000-byte queries via {vip} at MTU 1,400: {out}")
        made = total(d, "ferry_xsk_fragments_made_total")
        check(made >= 3 * 2, f"IPv4 fragments cut by ferry: {made}")


def test_a_stopped_backend_is_refused_at_once(workdir):
    with serving(workdir) as (lab, d):
        res = dig(lab.client, VIP4, CLIENT4, "who.example.test", "TXT")
        check_eq(res["status"], "NOERROR", "served before the backends stop")
        for _, _, _, p, _ in lab.dnsmasq:
            p.kill()
            p.wait()
        for vip, src in ((VIP4, CLIENT4), (VIP6, CLIENT6)):
            started = time.monotonic()
            r = lab.client.run(*dig_args(vip, src, "who.example.test", "TXT"), check=False)
            wall = time.monotonic() - started
            # dig says "timed out" after its 2 s without the translated port unreachable.
            check("connection refused" in (r.stdout + r.stderr),
                  f"dig via {vip} to stopped dnsmasq ({wall:.2f} s): {r.stdout[-300:]} "
                  f"{r.stderr[-300:]}")
            print(f"  dig via {vip} to stopped dnsmasq: connection refused in {wall:.2f} s")
        check(total(d, "ferry_xsk_icmp_translated_total") >= 2, "port unreachable translated")


def test_tracepath_shows_the_gateway(workdir):
    with serving(workdir) as (lab, d):
        for target, extra in ((VIP4, ["-p", str(PORT)]), (SINK4, [])):
            r = lab.client.run("timeout", "30", "tracepath", "-n", "-m", "2", *extra, target,
                               check=False)
            first = [l for l in r.stdout.splitlines() if re.match(r"\s*1:", l)]
            check(any(GW_CLIENT4 in l for l in first),
                  f"tracepath {target}: the gateway {GW_CLIENT4} at hop 1:\n{r.stdout}")
        check(total(d, "ferry_xsk_icmp_sent_total", kind="time_exceeded") >= 2,
              "time exceeded sent")
