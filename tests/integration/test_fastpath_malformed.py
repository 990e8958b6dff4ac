"""A barrage of malformed and unusual frames, sent raw (AF_PACKET) from the client namespace to the
service VIP and to the routed prefix: every class moves exactly the counters it should (XDP
malformed / fragment / pass / redirect, the workers' malformed drops, the kernel's AF_XDP drops,
the receivers' checksum errors), and afterwards ferryd is alive, still balances and still accounts
for every frame."""
import socket
import struct
import time

from fastpath_lab import (BACKENDS, CLIENT, PORT, SINK, SINK_PORT, SINK_SCRIPT, VIP, Lab,
                          check_conserved, fastpath_config, inside)
from harness import TestFailure, check, check_eq, ok, running, wait_until
from inet_checksum import csum

FRAMES_PER_DESTINATION = 8
# UMEM frames of 2048 bytes hold 2048 - 256 (XDP headroom) bytes of a received frame; the client's
# veth MTU lets larger ones through.
FRAME_BYTES = 2048
LAB_MTU = 3000
JUMBO_PAYLOAD = 2400
V6_SRC, V6_DST = "fd00:1::2", "fd00:100::10"


def eth(dst_mac, src_mac, ethertype):
    return bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + \
        struct.pack("!H", ethertype)


def udp(src, dst, sport, dport, payload, length=None, bad_checksum=False):
    """A UDP header + payload with a correct checksum over the IPv4 pseudo header (or one off)."""
    length = 8 + len(payload) if length is None else length
    head = struct.pack("!HHHH", sport, dport, length, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, 8 + len(payload))
    c = csum(pseudo + head + payload) or 0xffff
    if bad_checksum:
        c = (c + 0x1111) & 0xffff or 0x1
    return head[:6] + struct.pack("!H", c) + payload


def ipv4(src, dst, body, ihl=5, options=b"", total_length=None, frag=0x4000, ttl=64,
         bad_checksum=False, proto=17, ident=0x1234):
    total_length = 4 * ihl + len(body) if total_length is None else total_length
    header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total_length & 0xffff, ident, frag, ttl,
                         proto, 0, socket.inet_aton(src), socket.inet_aton(dst)) + options
    c = csum(header[: 4 * ihl] if 4 * ihl <= len(header) else header)
    if bad_checksum:
        c ^= 0x0101
    return header[:10] + struct.pack("!H", c) + header[12:] + body


def ipv6(next_header, body, payload_length=None):
    payload_length = len(body) if payload_length is None else payload_length
    return struct.pack("!IHBB", 0x60000000, payload_length, next_header, 64) + \
        socket.inet_pton(socket.AF_INET6, V6_SRC) + socket.inet_pton(socket.AF_INET6, V6_DST) + body


class Barrage:
    """Builds the frames of each class and checks the counters they move."""

    def __init__(self, lab, daemon, sink_log):
        self.lab = lab
        self.d = daemon
        self.sink_log = sink_log  # the routed sink's output: "ttl length head" per datagram
        self.l2 = eth(lab.mac["g0"], lab.mac["c0"], 0x0800)
        self.l2_v6 = eth(lab.mac["g0"], lab.mac["c0"], 0x86DD)
        self.sport = 41000
        with inside(lab.client):
            self.raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            self.raw.bind(("c0", 0))
            # Replies to the well-formed-but-unusual requests come back to this port.
            self.replies = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.replies.bind((CLIENT, self.sport))
            self.replies.setblocking(False)

    def close(self):
        self.raw.close()
        self.replies.close()

    def snapshot(self):
        fams = {f["name"]: f["samples"] for f in ok(self.d.request("stats", {"prefix": "ferry_x"}))["metrics"]}

        def sum_of(name, **match):
            return sum(s["value"] for s in fams.get(name, [])
                       if all(s["labels"].get(k) == v for k, v in match.items()))
        drops = fams.get("ferry_xsk_drops_total", [])
        netstat = self.receiver_stats()
        return {
            "xdp_malformed": sum_of("ferry_xdp_packets_total", action="malformed"),
            "xdp_fragment": sum_of("ferry_xdp_packets_total", action="fragment"),
            "xdp_pass": sum_of("ferry_xdp_packets_total", action="pass"),
            "xdp_redirect": sum_of("ferry_xdp_packets_total", action="redirect"),
            "xdp_no_socket": sum_of("ferry_xdp_packets_total", action="no_socket"),
            "worker_rx": sum_of("ferry_xsk_rx_packets_total"),
            "worker_tx": sum_of("ferry_xsk_tx_packets_total"),
            "worker_malformed": sum_of("ferry_xsk_drops_total", reason="malformed"),
            "worker_other_drops": sum(s["value"] for s in drops if s["labels"]["reason"] != "malformed"),
            "kernel_rx_dropped": sum_of("ferry_xsk_kernel_drops_total", reason="rx_dropped"),
            "kernel_other_drops": sum(s["value"] for s in fams.get("ferry_xsk_kernel_drops_total", [])
                                      if s["labels"]["reason"] != "rx_dropped"),
            "receiver_ip_csum_errors": netstat[("IpExt", "InCsumErrors")],
            "receiver_udp_csum_errors": netstat[("Udp", "InCsumErrors")],
        }

    def receiver_stats(self):
        """The backends' namespace's /proc/net/snmp + netstat, {(group, field): value}."""
        out = {}
        lines = self.lab.back.run("cat", "/proc/net/snmp", "/proc/net/netstat").stdout.splitlines()
        for names, values in zip(lines[0::2], lines[1::2]):
            group = names.split(":")[0]
            for k, v in zip(names.split()[1:], values.split()[1:]):
                out[(group, k)] = int(v)
        return out

    def ipv4_frames(self, build):
        """FRAMES_PER_DESTINATION frames to the VIP and as many to the routed sink."""
        return [build(d, p, b) for d, p, b in self.destinations()]

    def expect(self, name, frames, **moves):
        """Sends `frames`, then waits until the counters moved by exactly `moves` (every other
        counter of the snapshot by 0) and stay there."""
        before = self.snapshot()
        for f in frames:
            self.raw.send(f)
        want = {k: moves.get(k, 0) for k in before}
        seen = {}

        def moved():
            now = self.snapshot()
            seen.update({k: now[k] - before[k] for k in now})
            return seen == want
        try:
            wait_until(moved, 10, f"{name}: counters to move by {moves}", interval=0.1)
            time.sleep(0.3)  # nothing more may arrive late
            check(moved(), "late")
        except TestFailure:
            diff = {k: (seen.get(k), want[k]) for k in want if seen.get(k) != want[k]}
            raise TestFailure(f"{name}: counters (got, expected) differ: {diff}") from None
        check(self.d.proc.poll() is None, f"ferryd alive after {name}")

    def run(self):
        n = 2 * FRAMES_PER_DESTINATION  # frames of each IPv4 class
        m = FRAMES_PER_DESTINATION      # frames of each IPv6 class
        l2, l2v6 = self.l2, self.l2_v6
        sport = self.sport

        def good_udp(dst, dport, payload, **kw):
            return udp(CLIENT, dst, sport, dport, payload, **kw)

        def good_ip(dst, dport, payload, **kw):
            return ipv4(CLIENT, dst, good_udp(dst, dport, payload), **kw)

        # Truncated at every header boundary: the XDP program passes them to the kernel as malformed.
        self.expect("ethernet header only", [l2] * n, xdp_malformed=n)
        self.expect("ethernet header only (IPv6)", [l2v6] * m, xdp_malformed=m)
        vlan = eth(self.lab.mac["g0"], self.lab.mac["c0"], 0x8100)
        self.expect("truncated VLAN tag", [vlan + b"\x00\x05"] * n, xdp_malformed=n)
        self.expect("truncated inner VLAN tag", [vlan + b"\x00\x05\x81\x00\x00\x06"] * n, xdp_malformed=n)
        self.expect("truncated IPv4 header",
                    [l2 + f[:19] for f in self.ipv4_frames(good_ip)], xdp_malformed=n)
        self.expect("truncated IPv4 header behind a VLAN tag",
                    [vlan + b"\x00\x05\x08\x00" + f[:19] for f in self.ipv4_frames(good_ip)],
                    xdp_malformed=n)
        self.expect("IPv4 header, no UDP header",
                    [l2 + ipv4(CLIENT, d, b"") for d, _, _ in self.destinations()],
                    xdp_malformed=n)
        self.expect("truncated UDP header",
                    [l2 + ipv4(CLIENT, d, good_udp(d, p, b)[:7]) for d, p, b in self.destinations()],
                    xdp_malformed=n)
        udp6 = struct.pack("!HHHH", sport, PORT, 16, 0) + b"v6 frame"
        self.expect("truncated IPv6 header", [l2v6 + ipv6(17, udp6)[:39]] * m, xdp_malformed=m)
        self.expect("IPv6 header, no UDP header", [l2v6 + ipv6(17, b"")] * m, xdp_malformed=m)
        self.expect("truncated UDP header behind IPv6", [l2v6 + ipv6(17, udp6[:7])] * m,
                    xdp_malformed=m)

        # Inconsistent IPv4 headers and lengths.
        self.expect("IHL below 5", [l2 + f for f in self.ipv4_frames(lambda d, p, b: good_ip(d, p, b, ihl=4))],
                    xdp_malformed=n)
        self.expect("IHL past the frame",
                    [l2 + f for f in self.ipv4_frames(lambda d, p, b: good_ip(d, p, b, ihl=15))],
                    xdp_malformed=n)
        self.expect("IPv4 total length past the frame",
                    [l2 + f for f in self.ipv4_frames(lambda d, p, b: good_ip(d, p, b, total_length=20 + 8 + len(b) + 64))],
                    xdp_malformed=n)
        self.expect("IPv4 total length below the header",
                    [l2 + f for f in self.ipv4_frames(lambda d, p, b: good_ip(d, p, b, total_length=16))],
                    xdp_malformed=n)
        self.expect("IPv6 payload length past the frame", [l2v6 + ipv6(17, udp6, payload_length=200)] * m,
                    xdp_malformed=m)
        self.expect("UDP length below 8",
                    [l2 + ipv4(CLIENT, d, good_udp(d, p, b, length=4)) for d, p, b in self.destinations()],
                    xdp_malformed=n)
        # These pass the XDP program's checks; the worker's parser refuses them (bad_udp_length,
        # truncated_udp) and counts them as malformed drops.
        self.expect("UDP length past the IP payload",
                    [l2 + ipv4(CLIENT, d, good_udp(d, p, b, length=8 + len(b) + 10)) for d, p, b in self.destinations()],
                    xdp_redirect=n, worker_rx=n, worker_malformed=n)
        self.expect("IPv4 total length cutting the UDP header",
                    [l2 + good_ip(d, p, b, total_length=24) for d, p, b in self.destinations()],
                    xdp_redirect=n, worker_rx=n, worker_malformed=n)

        # Bad checksums: ferry rewrites incrementally, so a bad sum stays bad and the receiver (a
        # backend, or the routed sink) drops the frame; nothing is echoed.
        self.expect("bad IPv4 header checksum",
                    [l2 + good_ip(d, p, b, bad_checksum=True) for d, p, b in self.destinations()],
                    xdp_redirect=n, worker_rx=n, worker_tx=n, receiver_ip_csum_errors=n)
        self.expect("bad UDP checksum",
                    [l2 + ipv4(CLIENT, d, good_udp(d, p, b, bad_checksum=True)) for d, p, b in self.destinations()],
                    xdp_redirect=n, worker_rx=n, worker_tx=n, receiver_udp_csum_errors=n)

        # IPv4 options are legal: balanced (and answered from the VIP) or routed like any datagram.
        routed_before = self.sink_count()
        self.expect("IPv4 options",
                    [l2 + good_ip(d, p, b"ipopt " + b, ihl=6, options=b"\x01\x01\x01\x00")
                     for d, p, b in self.destinations()],
                    xdp_redirect=n + m, worker_rx=n + m, worker_tx=n + m)
        check_eq(self.drain_replies(), m, "echo replies from the VIP to requests with IP options")
        wait_until(lambda: self.sink_count() - routed_before == m, 5,
                   "routed datagrams with IP options at the sink")

        # Frames that belong to the kernel: a third VLAN tag, IPv6 extension headers, fragments.
        qinqinq = eth(self.lab.mac["g0"], self.lab.mac["c0"], 0x88A8) + b"\x00\x01\x81\x00" + \
            b"\x00\x02\x81\x00\x00\x03\x08\x00"
        self.expect("three VLAN tags", [qinqinq + good_ip(d, p, b) for d, p, b in self.destinations()],
                    xdp_pass=n)
        for name, nh, ext in (("hop-by-hop options", 0, b"\x11\x00\x01\x04\x00\x00\x00\x00"),
                              ("destination options", 60, b"\x11\x00\x01\x04\x00\x00\x00\x00"),
                              ("routing header", 43, b"\x11\x00\x00\x00\x00\x00\x00\x00"),
                              ("fragment header", 44, b"\x11\x00\x00\x01\x00\x00\x00\x07")):
            self.expect(f"IPv6 {name}", [l2v6 + ipv6(nh, ext + udp6)] * m, xdp_fragment=m)
        # Fragments of UDP to the VIP and the routed prefix are ferry's (test_ip_hop.py has whole
        # datagrams): a first fragment is forwarded as its datagram; a later one whose first
        # never comes waits for it and is dropped after the held timeout (fragment_timeout).
        def fragment_of(ident, frag):
            return lambda d, p, b: l2 + ipv4(CLIENT, d, good_udp(d, p, b), frag=frag, ident=ident)
        self.expect("IPv4 first fragments",
                    [fragment_of(0x2000 + i, 0x2000)(d, p, b) for i, (d, p, b) in enumerate(self.destinations())],
                    xdp_redirect=n, worker_rx=n, worker_tx=n)
        for name, frag, base in (("middle", 0x2000 | 100, 0x3000), ("last", 100, 0x4000)):
            self.expect(f"IPv4 {name} fragments without their first",
                        [fragment_of(base + i, frag)(d, p, b) for i, (d, p, b) in enumerate(self.destinations())],
                        xdp_redirect=n, worker_rx=n, worker_other_drops=n)

        # Larger than a UMEM frame: the program redirects, the kernel cannot put it in a frame and
        # counts it in the socket's rx_dropped; the worker never sees it.
        big = b"j" * JUMBO_PAYLOAD
        self.expect("frame larger than a UMEM frame",
                    [l2 + good_ip(d, p, big) for d, p, _ in self.destinations()],
                    xdp_redirect=n, kernel_rx_dropped=n)

    def destinations(self):
        """(address, port, payload): FRAMES_PER_DESTINATION to the VIP, as many to the sink."""
        return [(d, p, b"barrage %04d ..." % i) for d, p in ((VIP, PORT), (SINK, SINK_PORT))
                for i in range(FRAMES_PER_DESTINATION)]

    def drain_replies(self):
        got = 0
        deadline = time.monotonic() + 5
        while got < FRAMES_PER_DESTINATION and time.monotonic() < deadline:
            try:
                data, src = self.replies.recvfrom(65535)
            except BlockingIOError:
                time.sleep(0.02)
                continue
            check_eq(src, (VIP, PORT), "reply source")
            check(data.startswith(b"ipopt barrage"), f"reply payload {data[:20]!r}")
            got += 1
        return got

    def sink_count(self):
        with open(self.sink_log) as f:
            return sum(1 for line in f if "ipopt" in line and line.startswith("63 "))


def test_malformed_frames_are_counted_by_class_and_harm_nothing(workdir):
    lab = Lab(mtu=LAB_MTU, static_neighbours=True)
    barrage = None
    try:
        # No reassembly timeout in the receivers' namespace may answer the first fragments with an
        # ICMP error while the test counts frames.
        lab.back.run("sysctl", "-qw", "net.ipv4.ipfrag_time=600")
        lab.start_echo(workdir)
        sink_log = workdir.file("sink.log")
        lab.spawn(lab.back, SINK_SCRIPT, SINK, str(SINK_PORT), "600", log=sink_log)
        wait_until(lambda: "ready" in open(sink_log).read(), 10, "sink")
        with running(workdir, fastpath_config(workdir, frame_bytes=FRAME_BYTES), netns=lab.gw.name) as d:
            res = lab.converse("before", flows=6, rounds=1)
            check_eq((res["ok"], res["lost"]), (6, 0), f"serving before the barrage {res}")
            barrage = Barrage(lab, d, sink_log)
            barrage.run()

            res = lab.converse("after", flows=30, rounds=2, base=21000)
            check_eq((res["ok"], res["bad"], res["lost"]), (60, 0, 0), f"serving after the barrage {res}")
            served = {b for s in lab.echoed("after").values() for b in s}
            check_eq(served, set(BACKENDS), "every backend still serves")
            check_conserved(d)
            check_eq(d.stop(), 0, "graceful exit after the barrage")
    finally:
        if barrage:
            barrage.close()
        lab.close()
