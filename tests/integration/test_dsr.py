"""Direct server return (docs/dsr.md), with real software: ferryd on a one-armed gateway sends the
requests of its ipip and gue services, IPv4 and IPv6, UDP and TCP, unchanged inside an outer
header to three backends that decapsulate them with ferry-decap and answer the client directly
from the VIP: nginx over HTTP (many short connections, and a long transfer checked by sha256) and
dnsmasq over DNS (dig, UDP and TCP, and dnsperf losing nothing). Replies never cross the
gateway; two services share one backend address and port; an established TCP connection keeps
its backend when the backends change (a backend added by reload, weights, drain); a request too
big for the link once encapsulated gets its ICMP, and a TCP upload with the client's default MSS
gets through by path MTU discovery; a fragmented query reaches its backend whole (over IPv4 on its
first attempt: the gateway cuts what is too big for the tunnel)."""
import hashlib
import socket
import sys

import pytest

from dsr_lab import (BIG_BYTES, BACKENDS4, BACKENDS6, CLIENT4, CLIENT6, DNS, DsrLab, HTTP, NAMES,
                     VIP4, VIP4B, VIP6, dsr_config)
from fastpath_lab import check_one_match, inside
from test_dns import dig, dnsperf
from harness import by_label, check, check_eq, ok, samples, total, wait_until


@pytest.fixture(scope="module")
def served():
    """The lab with its servers and ferryd on the gateway, shared by the file's tests."""
    import harness
    w = harness.Workdir()
    lab = DsrLab(w)
    try:
        lab.start_servers()
        # web starts on two backends: a test adds the third by reload.
        with harness.running(w, dsr_config(w, web_backends=2), netns=lab.gw.name) as d:
            yield lab, d
    finally:
        lab.close()
        w.cleanup()


def names_over(lab, vip, count):
    """The backend names of `count` fresh HTTP connections to vip:80 (each a new source port)."""
    seen = {}
    for _ in range(count):
        code, body = lab.curl(vip, "/name")
        check_eq(code, 200, f"GET /name via {vip}")
        name = body.decode().strip()
        check(name in NAMES, f"a backend's name: {name!r}")
        seen[name] = seen.get(name, 0) + 1
    return seen


@pytest.mark.parametrize("vip", [VIP4, VIP4B, VIP6])
def test_http_short_connections_spread_and_answer_directly(served, vip):
    lab, d = served
    seen = names_over(lab, vip, 24)
    print(f"{vip}: {seen}", flush=True)
    check(len(seen) >= 2, f"24 connections spread over the backends: {seen}")


@pytest.mark.parametrize("vip", [VIP4, VIP6])
def test_long_transfer_arrives_whole_and_bypasses_the_gateway(served, vip):
    lab, d = served
    rx_before = total(d, "ferry_xsk_rx_bytes_total")
    code, body = lab.curl(vip, "/big", timeout=60)
    check_eq(code, 200, f"GET /big via {vip}")
    check_eq(len(body), BIG_BYTES, "the transfer's size")
    check_eq(hashlib.sha256(body).hexdigest(), lab.big_sha256, "the transfer's sha256")
    # The gateway saw the client's direction only: its SYN, ACKs and request, a few KB.
    rx = total(d, "ferry_xsk_rx_bytes_total") - rx_before
    print(f"{vip}: {BIG_BYTES} bytes received by the client, {rx:.0f} bytes through the gateway",
          flush=True)
    check(rx < BIG_BYTES / 20, f"the reply bypassed the gateway: {rx} bytes reached its workers")


@pytest.mark.parametrize("vip", [VIP4, VIP6])
def test_dns_over_udp_and_tcp(served, vip):
    lab, d = served
    before = lab.queries_by_backend()
    answers = {}
    for tcp in (False, True):
        for _ in range(12):
            r = dig(lab.client, vip, None, "who.example.test", "TXT", tcp=tcp)
            check_eq((r["rc"], r["status"]), (0, "NOERROR"), f"dig via {vip}: {r['output']}")
            check_eq(len(r["answers"]), 1, f"one TXT answer: {r['output']}")
            answers[r["answers"][0]] = answers.get(r["answers"][0], 0) + 1
    after = lab.queries_by_backend()
    print(f"{vip}: answers {answers}, queries per backend "
          f"{ {n: after[n] - before[n] for n in NAMES} }", flush=True)
    check(len(answers) >= 2, f"24 queries spread over the backends: {answers}")


@pytest.mark.parametrize("vip,src", [(VIP4, CLIENT4), (VIP6, CLIENT6)])
def test_dnsperf_loses_nothing_and_every_backend_answers(served, vip, src):
    """dnsperf at a fixed rate over UDP (gue on IPv4, ipip on IPv6): every query answered, by
    all three dnsmasq, the answers straight from the backends."""
    lab, d = served
    logged = lab.queries_by_backend()
    fig = dnsperf(lab, lab.w, vip, src, port=DNS, seconds=3, qps=1000)
    print(f"{vip}: {fig}", flush=True)
    check_eq(fig["lost"], 0, f"queries lost against {vip}")
    check(fig["sent"] > 0 and fig["completed"] == fig["sent"], f"every query answered: {fig}")
    wait_until(lambda: sum(lab.queries_by_backend().values()) - sum(logged.values())
               >= fig["completed"], 10, "dnsmasq's log lines of the answered queries")
    served_by = {n: lab.queries_by_backend()[n] - logged[n] for n in NAMES}
    check(all(served_by.values()), f"every backend answered some: {served_by}")


def test_services_show_the_forwarding(served, ferryctl):
    lab, d = served
    services = {s["name"]: s for s in ok(d.request("services"))["services"]}
    check_eq((services["web"]["forwarding"], services["web"]["paths"]), ("ipip", {"tcp": "fastpath"}),
             "web in `services`")
    check_eq(services["dns"]["paths"], {"udp": "fastpath", "tcp": "fastpath"}, "dns's paths")
    text = ferryctl.out(d, "services")
    check("tcp fastpath ipip" in text and "udp fastpath gue, tcp fastpath gue" in text,
          f"`ferryctl services` shows the forwarding:\n{text}")


def test_every_outer_header_was_used_and_counted(served):
    lab, d = served
    # The module's other tests ran first in file order; make sure each path carried something.
    names_over(lab, VIP4, 2)
    names_over(lab, VIP4B, 2)
    names_over(lab, VIP6, 2)
    dig(lab.client, VIP4, None, "who.example.test", "TXT")
    dig(lab.client, VIP6, None, "who.example.test", "TXT")
    encap = by_label(d, "ferry_xsk_encapsulated_packets_total", "encap")
    print(f"encapsulated by outer header: {encap}", flush=True)
    for path in ("ipip4", "gue4", "ipip6", "gue6"):
        check(encap.get(path, 0) > 0, f"{path} requests were encapsulated: {encap}")
    for ns in lab.backends:
        iface = lab.decap_status(ns)["interfaces"][0]
        stripped = sum(v["packets"] for v in iface["stripped"].values())
        refused = {k: v["packets"] for k, v in iface["refused"].items() if v["packets"]}
        print(f"{ns.name}: stripped {stripped}, refused {refused}", flush=True)
        check(stripped > 0, f"{ns.name}: ferry-decap stripped the gateway's tunnel packets")
        check_eq(refused, {}, f"{ns.name}: ferry-decap refused none of them")
    check_backend_counts_match_the_tunnels(lab, d)
    # The XDP program's match came with every frame, TCP ones included: one match per frame.
    check_one_match(d, 1)
    drops = by_label(d, "ferry_xsk_drops_total", "reason")
    check_eq({r: n for r, n in drops.items() if n and r not in ("unexpected",)}, {},
             "the workers dropped nothing")


def check_backend_counts_match_the_tunnels(lab, d):
    """What the workers counted per backend is what arrived through the tunnels: per backend host,
    the packets sent to its addresses (every service, both families) are those its ferry-decap
    stripped; summed, they are every encapsulated request; no backend has an "out"."""
    def counted():
        by_host, directions = {}, set()
        for labels, v in samples(d, "ferry_xsk_backend_packets_total"):
            directions.add(labels["direction"])
            address = labels["backend"].rsplit(":", 1)[0].strip("[]")
            host = next(n for n, a4, a6 in zip(NAMES, BACKENDS4, BACKENDS6) if address in (a4, a6))
            by_host[host] = by_host.get(host, 0) + v
        return by_host, directions

    def stripped():
        return {name: sum(v["packets"] for v in lab.decap_status(ns)["interfaces"][0]["stripped"]
                          .values()) for name, ns in zip(NAMES, lab.backends)}
    # The last ACKs of the closed connections may still be on their way.
    try:
        wait_until(lambda: counted()[0] == stripped(), 10,
                   "the per-backend counts to match what each backend's ferry-decap stripped")
    finally:
        print(f"per backend host: counted {counted()[0]}, stripped {stripped()}", flush=True)
    by_host, directions = counted()
    check_eq(directions, {"in"}, "directions of encapsulating services' backends")
    check_eq(sum(by_host.values()), total(d, "ferry_xsk_encapsulated_packets_total"),
             "the backends' counts add up to every encapsulated request")


def test_tcp_connections_keep_their_backend_when_backends_change(served, ferryctl):
    """Kept-alive connections to web (ipip) while a third backend joins by reload, the first
    weighs five times the others and the second is drained: every connection keeps its backend
    (the flow table; Maglev now names another for some), new ones reach the third and avoid the
    drained one."""
    lab, d = served
    p = lab.keepalive_clients(VIP4, 24, 2)
    try:
        first = p.stdout.readline().split()
        check_eq(len(first), 24, "24 kept-alive connections answered")
        check_eq(set(first) <= set(NAMES[:2]), True, f"web's two backends answer: {first}")
        lab.w.write_config(dsr_config(lab.w, web_backends=3))
        ok(d.request("reload"), "reload adding web's third backend")
        ferryctl.out(d, "backend", "web", f"{BACKENDS4[0]}:{HTTP}", "weight", "5")
        ferryctl.out(d, "backend", "web", f"{BACKENDS4[1]}:{HTTP}", "drain")
        p.stdin.write("go\n")
        p.stdin.flush()
        for _ in range(2):
            now = p.stdout.readline().split()
            check_eq(now, first, "every connection kept its backend")
        # New connections reach the new backend and avoid the drained one.
        seen = names_over(lab, VIP4, 24)
        check(NAMES[1] not in seen, f"no new connection to the drained backend: {seen}")
        check(NAMES[2] in seen, f"new connections reach the added backend: {seen}")
    finally:
        p.kill()
        p.wait()
        ferryctl(d, "backend", "web", f"{BACKENDS4[0]}:{HTTP}", "weight", "1")
        ferryctl(d, "backend", "web", f"{BACKENDS4[1]}:{HTTP}", "enable")


def test_too_big_once_encapsulated_gets_its_icmp(served):
    """A DF datagram that fits the client's link but not with the outer header: the client learns
    the MTU less the overhead (IP_MTU), as from any router."""
    lab, d = served
    IP_MTU = 14
    IP_MTU_DISCOVER, IP_PMTUDISC_DO = 10, 2
    too_big_before = total(d, "ferry_xsk_icmp_sent_total", kind="too_big")
    with inside(lab.client):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        s.connect((VIP4, DNS))
        s.send(b"x" * (1500 - 28))

        def learned():
            try:
                s.send(b"y" * 8)
            except OSError:
                pass
            return s.getsockopt(socket.IPPROTO_IP, IP_MTU) < 1500
        wait_until(learned, 10, "the client learning the path MTU")
        mtu = s.getsockopt(socket.IPPROTO_IP, IP_MTU)
        s.close()
    check_eq(mtu, 1500 - 28, "the MTU the client learned: the link's less GUE over IPv4")
    check(total(d, "ferry_xsk_icmp_sent_total", kind="too_big") > too_big_before,
          "the gateway sent fragmentation needed")


def test_tcp_upload_with_default_mss_finds_the_path_mtu(served):
    lab, d = served
    body = lab.w.file("upload")
    with open(body, "wb") as f:
        f.write(b"u" * (512 * 1024))
    code, answer = lab.curl(VIP4, "/name", timeout=60,
                            extra=("-X", "POST", "--data-binary", f"@{body}"))
    check(code in (200, 405), f"the upload reached nginx: {code}")


# A TXT query for who.example.test padded to about 2 KB with an EDNS padding option (RFC 7830),
# sent from the client's stack with fragmentation allowed (IPv4: IP_PMTUDISC_DONT), retried up to
# three times a second apart as a resolver does; prints the answer's TXT strings.
PADDED_QUERY = r"""
import socket, struct, sys
vip, src = sys.argv[1], sys.argv[2]
family = socket.AF_INET6 if ":" in vip else socket.AF_INET
s = socket.socket(family, socket.SOCK_DGRAM)
if family == socket.AF_INET:
    s.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_MTU_DISCOVER = IP_PMTUDISC_DONT
s.bind((src, 0))
s.settimeout(1.0)
qname = b"\x03who\x07example\x04test\x00"
pad = 2000
query = (struct.pack("!HHHHHH", 0x2c2c, 0x0100, 1, 0, 0, 1) + qname + struct.pack("!HH", 16, 1)
         + b"\x00" + struct.pack("!HHIH", 41, 4096, 0, 4 + pad) + struct.pack("!HH", 12, pad)
         + bytes(pad))
for attempt in range(3):
    s.sendto(query, (vip, 53))
    try:
        answer = s.recv(4096)
    except socket.timeout:
        continue
    print("answered on attempt", attempt + 1, "rcode", answer[3] & 0xf, answer[12 + len(qname) + 4:])
    break
else:
    print("no answer")
"""


@pytest.mark.parametrize("vip,src", [(VIP4, CLIENT4), (VIP6, CLIENT6)])
def test_a_fragmented_query_reaches_its_backend_whole(served, vip, src):
    """A DNS query of about 2 KB (EDNS padding): the client's stack sends it in 1500-byte
    fragments; every fragment goes inside the tunnel to its first fragment's backend, and the
    backend reassembles the query and answers with its name. IPv4 without DF: each fragment too big
    once encapsulated is cut again to fit, as a router cuts it, so the first attempt is answered.
    IPv6 (the second variant): the first fragment too big gets its packet too big, and the
    resolver's retry fits the MTU the client learned."""
    lab, d = served
    forwarded = total(d, "ferry_xsk_fragments_forwarded_total")
    made = total(d, "ferry_xsk_fragments_made_total")
    too_big = total(d, "ferry_xsk_icmp_sent_total", kind="too_big")

    def forget_path_mtu():  # each test starts from the link's MTU, whatever another one learned
        lab.client.run("ip", "-6" if ":" in vip else "-4", "route", "flush", "cache", check=False)
    forget_path_mtu()
    try:
        r = lab.client.run(sys.executable, "-c", PADDED_QUERY, vip, src, check=False)
    finally:
        forget_path_mtu()
    print(r.stdout, r.stderr, flush=True)
    check("answered" in r.stdout and "rcode 0" in r.stdout, f"the padded query answered: {r.stdout}")
    check(any(name in r.stdout for name in NAMES), f"a backend's name in the answer: {r.stdout}")
    check(total(d, "ferry_xsk_fragments_forwarded_total") >= forwarded + 2,
          "the query's fragments went through the workers")
    if vip == VIP4:
        check("attempt 1 " in r.stdout, f"answered on the first attempt, nothing to retry: {r.stdout}")
        check(total(d, "ferry_xsk_fragments_made_total") >= made + 2,
              "the gateway cut the client's fragments for the tunnel")
        check_eq(total(d, "ferry_xsk_icmp_sent_total", kind="too_big"), too_big,
                 "no fragmentation needed for a query without DF")
