"""ferry as an IP hop, frame by frame: raw fragments and ICMP errors sent with AF_PACKET from the
client namespace of the fast-path lab (UDP echo backends, static neighbours, so only the test's
frames move a counter), each class awaited until exactly its counters moved, IPv4 and IPv6:

* a 3,000-byte datagram in fragments in order, reversed, interleaved with a second one, and with
  a fragment duplicated reaches an echo backend whole, and the echo (fragmented by the backend's
  own stack) comes back translated to the client's UDP socket;
* overlapping fragments (fragment_overlap) and a tiny first fragment (fragment_tiny) refuse their
  datagram: it is never delivered, its other fragments are fragment_refused;
* 2,000 later fragments whose first never comes stay within the held bound, every one of them
  ends as fragment_hold_full or fragment_timeout, every frame is accounted for, and ferry serves
  on;
* ICMP errors quoting truncated headers or tuples ferry never sent are never forwarded to a
  backend (its namespace receives no ICMP unreachable): malformed, icmp_unmatched, or the
  kernel's (XDP pass); a genuine one about a reply reaches the backend.

IPv6 runs in a lab of its own (Lab(ipv6=True)): its link-local addresses' MLD reports cross it
when they please, so there the XDP pass and fragment (extension header) counters are not
compared."""
import contextlib
import socket
import struct
import time

from fastpath_lab import (BACKENDS, BACKENDS6, CLIENT, CLIENT6, PORT, VIP, VIP6, Lab,
                          check_conserved, fastpath_config, frames_by_queue, inside, quiescent,
                          samples)
from harness import TestFailure, check, check_eq, ok, running, wait_until
from test_fastpath_malformed import csum, eth, ipv4, udp

PAYLOAD = 3000  # bytes of UDP payload: 3,008 of UDP, three fragments at MTU 1,500 either way
FLOOD = 2000    # later fragments of as many datagrams whose first never comes
FLOOD_CHUNK = 100
HELD_FRAMES_BOUND = 256  # FragmentTable::Limits held_frames (a worker's slab / 8 is 256 here)
ICMP_PORT_UNREACHABLE = (3, 3)
ICMP6_PORT_UNREACHABLE = (1, 4)
V6_FRAGMENT_DATA = 1448  # the data, in 8-byte units, a 1,500-byte packet with a Fragment header holds
# Moved by what IPv6 itself sends across the lab when it pleases (MLD reports behind a hop-by-hop
# header): not compared in the IPv6 lab.
V6_NOISE = ("xdp_pass", "xdp_fragment")


def payload_of(tag):
    head = f"{tag} ".encode()
    return head + bytes((i * 7) & 0xff for i in range(PAYLOAD - len(head)))


def fragments(datagram_udp, ident, cuts, src=CLIENT, dst=VIP):
    """The IPv4 fragments of a UDP datagram (header + payload) cut at the byte offsets `cuts`
    (multiples of 8), each as an IPv4 packet with identification `ident`, DF clear."""
    edges = [0, *cuts, len(datagram_udp)]
    out = []
    for begin, end in zip(edges, edges[1:]):
        more = 0x2000 if end < len(datagram_udp) else 0
        out.append(ipv4(src, dst, datagram_udp[begin:end], frag=more | begin // 8, ident=ident))
    return out


def icmp(type_code, quote):
    head = struct.pack("!BBHI", *type_code, 0, 0)
    c = csum(head + quote)
    return head[:2] + struct.pack("!H", c) + head[4:] + quote


def pseudo6(src, dst, length, next_header):
    return socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + \
        struct.pack("!IxxxB", length, next_header)


def udp6(src, dst, sport, dport, payload):
    head = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
    c = csum(pseudo6(src, dst, 8 + len(payload), 17) + head + payload) or 0xffff
    return head[:6] + struct.pack("!H", c) + payload


def ipv6(src, dst, next_header, body, hop_limit=64):
    return struct.pack("!IHBB", 0x60000000, len(body), next_header, hop_limit) + \
        socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + body


def fragments6(datagram_udp, ident, cuts, src=CLIENT6, dst=VIP6):
    """IPv6 fragments as fragments() cuts them: the fixed header, a Fragment header, the data."""
    edges = [0, *cuts, len(datagram_udp)]
    return [ipv6(src, dst, 44, struct.pack("!BBHI", 17, 0, begin | (end < len(datagram_udp)), ident)
                 + datagram_udp[begin:end]) for begin, end in zip(edges, edges[1:])]


def icmp6(type_code, quote, src, dst):
    """An ICMPv6 error from `src` to `dst` quoting `quote`, as an IPv6 packet."""
    head = struct.pack("!BBHI", *type_code, 0, 0)
    c = csum(pseudo6(src, dst, len(head) + len(quote), 58) + head + quote)
    return ipv6(src, dst, 58, head[:2] + struct.pack("!H", c) + head[4:] + quote)


def snmp(ns):
    """{(group, field): value} of a namespace's /proc/net/snmp and /proc/net/snmp6 (group "6")."""
    lines = ns.run("cat", "/proc/net/snmp").stdout.splitlines()
    out = {}
    for names, values in zip(lines[0::2], lines[1::2]):
        group = names.split(":")[0]
        for k, v in zip(names.split()[1:], values.split()[1:]):
            out[(group, k)] = int(v)
    for line in ns.run("cat", "/proc/net/snmp6").stdout.splitlines():
        if line.strip():
            k, v = line.split()[:2]
            out[("6", k)] = int(v)
    return out


class Frames:
    """The raw socket on the client's veth, a UDP socket per client port for the echoes, and the
    counters each class of frames moves."""

    def __init__(self, lab, daemon, ignored=()):
        self.lab = lab
        self.d = daemon
        self.ignored = ignored  # counters not compared
        self.l2 = eth(lab.mac["g0"], lab.mac["c0"], 0x0800)
        self.l2_v6 = eth(lab.mac["g0"], lab.mac["c0"], 0x86DD)
        self.sockets = {}
        with inside(lab.client):
            self.raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            self.raw.bind(("c0", 0))

    def close(self):
        self.raw.close()
        for s in self.sockets.values():
            s.close()

    def client_port(self, port, client=CLIENT):
        """A bound UDP socket of the client on `port`, so that the echo finds a socket."""
        with inside(self.lab.client):
            s = socket.socket(socket.AF_INET6 if ":" in client else socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((client, port))
            s.settimeout(5)
        self.sockets[port] = s
        return s

    def counters(self):
        fams = {f["name"]: f["samples"]
                for f in ok(self.d.request("stats", {"prefix": "ferry_x"}))["metrics"]}

        def sum_of(name, **match):
            return sum(s["value"] for s in fams.get(name, [])
                       if all(s["labels"].get(k) == v for k, v in match.items()))
        out = {f"xdp_{a}": sum_of("ferry_xdp_packets_total", action=a)
               for a in ("redirect", "pass", "fragment", "malformed", "no_socket")}
        out.update({
            "worker_rx": sum_of("ferry_xsk_rx_packets_total"),
            "worker_tx": sum_of("ferry_xsk_tx_packets_total"),
            "fragments_forwarded": sum_of("ferry_xsk_fragments_forwarded_total"),
            "fragments_held": sum_of("ferry_xsk_fragments_held_total"),
            "fragments_made": sum_of("ferry_xsk_fragments_made_total"),
            "icmp_translated": sum_of("ferry_xsk_icmp_translated_total"),
            "icmp_sent": sum_of("ferry_xsk_icmp_sent_total"),
            "icmp_rate_limited": sum_of("ferry_xsk_icmp_rate_limited_total"),
            "kernel_drops": sum_of("ferry_xsk_kernel_drops_total"),
        })
        for s in fams.get("ferry_xsk_drops_total", []):
            key = "drop_" + s["labels"]["reason"]
            out[key] = out.get(key, 0) + s["value"]
        back, client = snmp(self.lab.back), snmp(self.lab.client)
        out.update({
            "backend_udp_in": back[("Udp", "InDatagrams")] + back[("6", "Udp6InDatagrams")],
            "backend_unreachables_in": back[("Icmp", "InDestUnreachs")] +
            back[("6", "Icmp6InDestUnreachs")],
            "backend_ipv4_in": back[("Ip", "InReceives")],
            # (The client's UDP InDatagrams moves when the test reads its socket: echoed().)
            "client_unreachables_in": client[("Icmp", "InDestUnreachs")] +
            client[("6", "Icmp6InDestUnreachs")],
        })
        return {k: v for k, v in out.items() if k not in self.ignored}

    def expect(self, name, frames, **moves):
        """Sends `frames` (IP packets), then awaits the counters moving by exactly `moves`, every
        other one by 0, and staying there."""
        before = self.counters()
        for f in frames:
            self.raw.send((self.l2_v6 if f[0] >> 4 == 6 else self.l2) + f)
        seen = {}

        def moved():
            now = self.counters()
            seen.clear()
            seen.update({k: now[k] - before.get(k, 0) for k in now if now[k] != before.get(k, 0)})
            return seen == moves
        try:
            wait_until(moved, 10, f"{name}: counters to move by {moves}", interval=0.05)
            time.sleep(0.2)  # nothing more may come late: an absence cannot be awaited
            check(moved(), "late")
        except TestFailure:
            diff = {k: (seen.get(k, 0), moves.get(k, 0)) for k in set(seen) | set(moves)
                    if seen.get(k, 0) != moves.get(k, 0)}
            raise TestFailure(f"{name}: counters (got, expected) differ: {diff}") from None
        check(self.d.proc.poll() is None, f"ferryd alive after {name}")

    def echoed(self, port, payload, what):
        data, src = self.sockets[port].recvfrom(65535)
        vip = VIP6 if self.sockets[port].family == socket.AF_INET6 else VIP
        check_eq(src[:2], (vip, PORT), f"{what}: the echo's source")
        check(data == payload, f"{what}: the echo is the datagram ({len(data)} bytes)")

    def datagram(self, port, tag, v6=False):
        """A client request to the VIP (UDP header and payload) and its payload."""
        payload = payload_of(tag)
        if v6:
            return udp6(CLIENT6, VIP6, port, PORT, payload), payload
        return udp(CLIENT, VIP, port, PORT, payload), payload


def echo_moves(request_fragments, held=0, duplicates=0, datagrams=1, v6=False):
    """The counters a fragmented echo exchange moves: the request's fragments in (one of them a
    duplicate, some held), the backend's echo in three fragments out to the client (whose socket
    echoed() reads)."""
    forwarded = request_fragments - duplicates + 3 * datagrams
    moves = {"xdp_redirect": request_fragments + 3 * datagrams,
             "worker_rx": request_fragments + 3 * datagrams, "worker_tx": forwarded,
             "fragments_forwarded": forwarded, "backend_udp_in": datagrams}
    if not v6:
        moves["backend_ipv4_in"] = request_fragments - duplicates
    if held:
        moves["fragments_held"] = held
    if duplicates:
        moves["drop_fragment_duplicate"] = duplicates
    return moves


def fragmented_datagrams_cross_whole_in_any_order(f):
    udp_a, payload_a = f.datagram(42001, "inorder")
    f.client_port(42001)
    f.expect("in order", fragments(udp_a, 0x5001, [1480, 2960]), **echo_moves(3))
    f.echoed(42001, payload_a, "in order")

    udp_b, payload_b = f.datagram(42002, "reversed")
    f.client_port(42002)
    five = fragments(udp_b, 0x5002, [600, 1200, 1800, 2400])
    f.expect("five fragments reversed", five[::-1], **echo_moves(5, held=4))
    f.echoed(42002, payload_b, "reversed")

    udp_c, payload_c = f.datagram(42003, "interleaved-c")
    udp_d, payload_d = f.datagram(42004, "interleaved-d")
    f.client_port(42003)
    f.client_port(42004)
    c = fragments(udp_c, 0x5003, [1480, 2960])
    d = fragments(udp_d, 0x5004, [1480, 2960])
    f.expect("two datagrams interleaved", [c[0], d[1], c[1], d[0], d[2], c[2]],
             **echo_moves(6, held=1, datagrams=2))
    f.echoed(42003, payload_c, "interleaved c")
    f.echoed(42004, payload_d, "interleaved d")

    udp_e, payload_e = f.datagram(42005, "duplicated")
    f.client_port(42005)
    e = fragments(udp_e, 0x5005, [1480, 2960])
    f.expect("a fragment duplicated", [e[0], e[1], e[1], e[2]], **echo_moves(4, duplicates=1))
    f.echoed(42005, payload_e, "duplicated")


def refused_datagrams_are_never_delivered(f):
    f.client_port(42011)
    udp_a, _ = f.datagram(42011, "overlap")
    first, middle, last = fragments(udp_a, 0x5011, [1480, 2960])
    overlapping = fragments(udp_a, 0x5011, [1400, 2880])[1]
    # A later fragment waits; one overlapping it refuses the datagram, the held one with it; the
    # first and last fragments that come after are refused too. Nothing reaches the backend.
    f.expect("overlapping fragments", [middle, overlapping, first, last],
             xdp_redirect=4, worker_rx=4, fragments_held=1, drop_fragment_overlap=1,
             drop_fragment_refused=3)

    # A first fragment with only the UDP ports (4 bytes) refuses its datagram.
    f.client_port(42012)
    udp_b, _ = f.datagram(42012, "tiny")
    tiny = ipv4(CLIENT, VIP, udp_b[:4], frag=0x2000, ident=0x5012)
    rest = fragments(udp_b, 0x5012, [8, 1480, 2960])[1:]
    f.expect("a tiny first fragment", [tiny, *rest], xdp_redirect=4, worker_rx=4,
             drop_fragment_tiny=1, drop_fragment_refused=3)
    for port in (42011, 42012):
        f.sockets[port].setblocking(False)
        try:
            data = f.sockets[port].recv(65535)
            raise TestFailure(f"port {port}: a refused datagram was echoed ({len(data)} bytes)")
        except BlockingIOError:
            pass


def a_flood_of_later_fragments_stays_within_the_held_bound(f):
    before = f.counters()
    biggest_hands = 0
    for start in range(0, FLOOD, FLOOD_CHUNK):
        for i in range(start, start + FLOOD_CHUNK):
            # The last 8 bytes of a datagram of 16 bytes of UDP, each of its own datagram.
            f.raw.send(f.l2 + ipv4(CLIENT, VIP, b"flood %02d" % (i % 100), frag=1, ident=0x8000 + i))
        wait_until(lambda: f.counters()["worker_rx"] - before["worker_rx"] >= start + FLOOD_CHUNK,
                   10, f"the workers to take {start + FLOOD_CHUNK} flood fragments", interval=0.02)
        hands = max(v for labels, v in samples(f.d, "ferry_xsk_frames") if labels["where"] == "hands")
        biggest_hands = max(biggest_hands, hands)
    check(biggest_hands <= HELD_FRAMES_BOUND,
          f"frames in a worker's hands during the flood: {biggest_hands}")

    def settled():
        now = f.counters()
        return (now.get("drop_fragment_hold_full", 0) + now.get("drop_fragment_timeout", 0) -
                before.get("drop_fragment_hold_full", 0) - before.get("drop_fragment_timeout", 0)
                == FLOOD)
    wait_until(settled, 10, "every flood fragment dropped as hold_full or timeout", interval=0.1)
    after = f.counters()
    moved = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    held = moved.get("fragments_held", 0)
    timed_out = moved.get("drop_fragment_timeout", 0)
    check(0 < timed_out <= held and held <= FLOOD, f"held {held}, timed out {timed_out}: {moved}")
    check_eq({k: v for k, v in moved.items() if k not in (
        "drop_fragment_hold_full", "drop_fragment_timeout", "fragments_held")},
        {"xdp_redirect": FLOOD, "worker_rx": FLOOD}, "what else the flood moved")
    check_conserved(f.d)
    for q, terms in frames_by_queue(f.d)[0].items():
        check_eq(terms["hands"], 0, f"queue {q}: nothing held after the flood")


def forged_and_truncated_icmp_errors_never_reach_a_backend(f):
    f.client_port(42021)
    reply = ipv4(VIP, CLIENT, udp(VIP, CLIENT, PORT, 42021, b"reply from the VIP"), ttl=62)
    # An IP header only: the XDP program cannot see the ports and passes it (no route to the VIP
    # in the gateway's kernel: dropped there).
    f.expect("quote of an IP header only",
             [ipv4(CLIENT, VIP, icmp(ICMP_PORT_UNREACHABLE, reply[:20]), proto=1)], xdp_pass=1)
    # The ports but not the whole UDP header: steered by its ports, malformed in the worker.
    f.expect("quote of the UDP ports only",
             [ipv4(CLIENT, VIP, icmp(ICMP_PORT_UNREACHABLE, reply[:24]), proto=1)],
             xdp_redirect=1, worker_rx=1, drop_malformed=1)
    # A request client -> backend the gateway never sent, "answered" towards the backend and
    # towards the VIP: steered (the quote names a backend), never translated.
    never_sent = ipv4(CLIENT, BACKENDS[0], udp(CLIENT, BACKENDS[0], 42021, PORT, b"never"), ttl=63)
    f.expect("a forged error about a request, to a backend and to the VIP",
             [ipv4(CLIENT, to, icmp(ICMP_PORT_UNREACHABLE, never_sent), proto=1)
              for to in (BACKENDS[0], VIP)],
             xdp_redirect=2, worker_rx=2, drop_icmp_unmatched=2)
    # A reply from the VIP from a port no service has: not steered, and the kernel has no route.
    other_port = ipv4(VIP, CLIENT, udp(VIP, CLIENT, PORT + 1, 42021, b"other"), ttl=62)
    f.expect("an error about a reply from a port no service has",
             [ipv4(CLIENT, VIP, icmp(ICMP_PORT_UNREACHABLE, other_port), proto=1)], xdp_pass=1)
    # The genuine error about the VIP's reply reaches the backend the flow is Maglev's for: the
    # backend's ICMP counter is a probe that works.
    f.expect("a genuine error about a reply",
             [ipv4(CLIENT, VIP, icmp(ICMP_PORT_UNREACHABLE, reply), proto=1)],
             xdp_redirect=1, worker_rx=1, worker_tx=1, icmp_translated=1,
             backend_unreachables_in=1, backend_ipv4_in=1)


def ipv6_fragments_and_errors(f):
    udp_a, payload_a = f.datagram(43001, "v6-inorder", v6=True)
    f.client_port(43001, CLIENT6)
    f.expect("IPv6 in order", fragments6(udp_a, 0x6001, [V6_FRAGMENT_DATA, 2 * V6_FRAGMENT_DATA]),
             **echo_moves(3, v6=True))
    f.echoed(43001, payload_a, "IPv6 in order")

    udp_b, payload_b = f.datagram(43002, "v6-reversed", v6=True)
    f.client_port(43002, CLIENT6)
    five = fragments6(udp_b, 0x6002, [600, 1200, 1800, 2400])
    f.expect("IPv6 five fragments reversed, one twice", [*five[:0:-1], five[3], five[0]],
             **echo_moves(6, held=4, duplicates=1, v6=True))
    f.echoed(43002, payload_b, "IPv6 reversed")

    f.client_port(43003, CLIENT6)
    udp_c, _ = f.datagram(43003, "v6-overlap", v6=True)
    first, middle, last = fragments6(udp_c, 0x6003, [1440, 2880])
    overlapping = fragments6(udp_c, 0x6003, [1400, 2840])[1]
    f.expect("IPv6 overlapping fragments", [middle, overlapping, first, last],
             xdp_redirect=4, worker_rx=4, fragments_held=1, drop_fragment_overlap=1,
             drop_fragment_refused=3)

    reply = ipv6(VIP6, CLIENT6, 17, udp6(VIP6, CLIENT6, PORT, 43001, b"reply from the VIP"), 62)
    f.expect("IPv6 quote of the UDP ports only",
             [icmp6(ICMP6_PORT_UNREACHABLE, reply[:44], CLIENT6, VIP6)],
             xdp_redirect=1, worker_rx=1, drop_malformed=1)
    never_sent = ipv6(CLIENT6, BACKENDS6[0], 17,
                      udp6(CLIENT6, BACKENDS6[0], 43001, PORT, b"never"), 63)
    f.expect("IPv6 forged errors about a request, to a backend and to the VIP",
             [icmp6(ICMP6_PORT_UNREACHABLE, never_sent, CLIENT6, to) for to in (BACKENDS6[0], VIP6)],
             xdp_redirect=2, worker_rx=2, drop_icmp_unmatched=2)
    f.expect("a genuine ICMPv6 error about a reply",
             [icmp6(ICMP6_PORT_UNREACHABLE, reply, CLIENT6, VIP6)],
             xdp_redirect=1, worker_rx=1, worker_tx=1, icmp_translated=1,
             backend_unreachables_in=1)


@contextlib.contextmanager
def frames_in_lab(w, ipv6=False):
    """The lab (static neighbours, echo backends, IPv6 too when asked), ferryd on its gateway and
    Frames on the client's veth; on the way out every frame accounted for and a graceful stop.
    No reassembly timeout may answer a datagram left incomplete with an ICMP error while the test
    counts frames."""
    lab = Lab(static_neighbours=True, ipv6=ipv6)
    frames = None
    try:
        for ns in (lab.back, lab.client):
            ns.run("sysctl", "-qw", "net.ipv6.ip6frag_time=600" if ipv6 else "net.ipv4.ipfrag_time=600")
        lab.start_echo(w)
        with running(w, fastpath_config(w, ipv6=ipv6), netns=lab.gw.name) as d:
            frames = Frames(lab, d, ignored=V6_NOISE if ipv6 else ())
            yield frames
            check_conserved(d)
            check_eq(d.stop(), 0, "graceful exit")
    finally:
        if frames:
            frames.close()
        lab.close()


def test_ip_hop_frames(workdir):
    with frames_in_lab(workdir) as frames:
        res = frames.lab.converse("before", flows=6, rounds=1)
        check_eq((res["ok"], res["lost"]), (6, 0), f"serving before the frames {res}")
        quiescent(frames.d)
        fragmented_datagrams_cross_whole_in_any_order(frames)
        refused_datagrams_are_never_delivered(frames)
        forged_and_truncated_icmp_errors_never_reach_a_backend(frames)
        a_flood_of_later_fragments_stays_within_the_held_bound(frames)

        # Serving on: datagrams whole and in fragments.
        res = frames.lab.converse("after", flows=30, rounds=2, base=21000)
        check_eq((res["ok"], res["bad"], res["lost"]), (60, 0, 0), f"serving after {res}")
        udp_z, payload_z = frames.datagram(42099, "after")
        frames.client_port(42099)
        frames.expect("in order after the flood", fragments(udp_z, 0x5099, [1480, 2960]),
                      **echo_moves(3))
        frames.echoed(42099, payload_z, "after the flood")


def test_ip_hop_frames_ipv6(workdir):
    with frames_in_lab(workdir, ipv6=True) as frames:
        ipv6_fragments_and_errors(frames)
