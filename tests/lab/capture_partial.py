#!/usr/bin/env python3
"""Captures real CHECKSUM_PARTIAL frames from a veth and writes them as unit-test vectors.

    capture_partial.py [--out tests/unit/packet/captured_frames.hh]      (run as root)

Two private network namespaces joined by a veth pair with default offloads; ordinary UDP sockets
on one side send (a) an IPv4 and (b) an IPv6 datagram with tx checksum offload on, so the kernel
leaves only the folded pseudo-header sum (not complemented) in the UDP checksum field, and then
(c) the same IPv4 datagram with offload off (tx_csum_off.py), which carries a complete checksum.
An AF_PACKET socket on the receiving veth sees the frames byte for byte. The script checks every
checksum field against its own computation, prints the frames and writes the C++ header. The
namespaces (and with them the veth) are deleted on every exit path. Standard library only."""
import argparse
import ctypes
import datetime
import os
import platform
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(ROOT, "tests", "unit", "packet", "captured_frames.hh")

TAG = f"fcap{os.getpid()}"
NS_TX, NS_RX = f"{TAG}-tx", f"{TAG}-rx"
IF_TX, IF_RX = "cap-tx", "cap-rx"  # each in its own namespace, so no clash with anything else
MAC_TX, MAC_RX = "02:00:00:00:00:01", "02:00:00:00:00:02"
V4_TX, V4_RX = "192.0.2.1", "192.0.2.2"
V6_TX, V6_RX = "2001:db8::1", "2001:db8::2"
SPORT, DPORT = 40000, 53
PAYLOAD_V4 = b"ferry-v4-partial"
PAYLOAD_V6 = b"ferry-v6-partial"

ETH_P_ALL, ETH_P_IP, ETH_P_IPV6 = 0x0003, 0x0800, 0x86DD
CLONE_NEWNET = 0x40000000
RECV_TIMEOUT = 2.0  # seconds per recv; a capture gives up after CAPTURE_DEADLINE
CAPTURE_DEADLINE = 5.0

libc = ctypes.CDLL(None, use_errno=True)


def run(*args):
    subprocess.run(args, check=True)


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class InNetns:
    """Moves this (single-threaded) process into a named network namespace for the with-block.
    Sockets opened inside stay in that namespace afterwards."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.home = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            setns(target)
        finally:
            os.close(target)

    def __exit__(self, *exc):
        try:
            setns(self.home)
        finally:
            os.close(self.home)


def fold(total):
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def sum16(data):
    if len(data) % 2:
        data += b"\0"
    return fold(sum(struct.unpack(f"!{len(data) // 2}H", data)))


def pseudo_header(src, dst, length):
    """RFC 768 / RFC 8200 8.1 pseudo-header for UDP, from packed addresses."""
    if len(src) == 4:
        return src + dst + struct.pack("!BBH", 0, socket.IPPROTO_UDP, length)
    return src + dst + struct.pack("!IxxxB", length, socket.IPPROTO_UDP)


def parse_udp(frame):
    """(family, src, dst, l3 header, udp segment) of an untagged IPv4/IPv6 UDP frame, else None."""
    if len(frame) < 14:
        return None
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    l3 = frame[14:]
    if ethertype == ETH_P_IP and len(l3) >= 20 and l3[0] >> 4 == 4 and l3[9] == socket.IPPROTO_UDP:
        ihl = (l3[0] & 0x0F) * 4
        total = struct.unpack_from("!H", l3, 2)[0]
        return socket.AF_INET, l3[12:16], l3[16:20], l3[:ihl], l3[ihl:total]
    if (ethertype == ETH_P_IPV6 and len(l3) >= 40 and l3[0] >> 4 == 6
            and l3[6] == socket.IPPROTO_UDP):
        plen = struct.unpack_from("!H", l3, 4)[0]
        return socket.AF_INET6, l3[8:24], l3[24:40], l3[:40], l3[40:40 + plen]
    return None


def capture(sock, family, payload):
    """The first received frame holding a UDP datagram of FAMILY, SPORT -> DPORT, PAYLOAD."""
    deadline = time.monotonic() + CAPTURE_DEADLINE
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, min(RECV_TIMEOUT, deadline - time.monotonic())))
        try:
            frame, addr = sock.recvfrom(65535)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        parsed = parse_udp(frame)
        if parsed is None or parsed[0] != family:
            continue
        udp = parsed[4]
        ports = struct.unpack_from("!HH", udp) if len(udp) >= 8 else None
        if ports == (SPORT, DPORT) and udp[8:] == payload:
            return frame
    raise TimeoutError(f"no {'IPv4' if family == socket.AF_INET else 'IPv6'} UDP frame "
                       f"{SPORT}->{DPORT} captured within {CAPTURE_DEADLINE}s")


def send(family, src, dst, payload):
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.bind((src, SPORT))
        s.sendto(payload, (dst, DPORT))


def expect_delivered(sock, payload):
    sock.settimeout(RECV_TIMEOUT)
    data, _ = sock.recvfrom(2048)
    if data != payload:
        raise RuntimeError(f"receiver socket got {data!r}, expected {payload!r}")


def check(frame, partial):
    """Returns (field, pseudo-header sum) after checking FIELD against what the kernel should have
    written: the folded pseudo-header sum for CHECKSUM_PARTIAL, a complete checksum otherwise."""
    family, src, dst, l3, udp = parse_udp(frame)
    if family == socket.AF_INET and sum16(l3) != 0xFFFF:
        raise RuntimeError("IPv4 header checksum does not verify")
    length = struct.unpack_from("!H", udp, 4)[0]
    if length != len(udp):
        raise RuntimeError(f"UDP length {length} != segment length {len(udp)}")
    field = struct.unpack_from("!H", udp, 6)[0]
    pseudo = sum16(pseudo_header(src, dst, length))
    if partial:
        if field != pseudo:
            raise RuntimeError(
                f"checksum field {field:#06x} is not the pseudo-header sum {pseudo:#06x}")
    else:
        if field == 0 or fold(pseudo + sum16(udp)) != 0xFFFF:
            raise RuntimeError(f"checksum field {field:#06x} does not verify")
    return field, pseudo


def hexdump(frame):
    return "\n".join(frame[i:i + 16].hex(" ") for i in range(0, len(frame), 16))


def cxx_array(name, comment, frame):
    lines = [f"// {line}" for line in comment]
    lines.append(f"inline constexpr std::uint8_t {name}[] = {{")
    for i in range(0, len(frame), 12):
        chunk = ", ".join(f"0x{b:02x}" for b in frame[i:i + 12])
        lines.append(f"    {chunk}{',' if i + 12 < len(frame) else '};'}")
    return "\n".join(lines)


def setup():
    run("ip", "netns", "add", NS_TX)
    run("ip", "netns", "add", NS_RX)
    run("ip", "-n", NS_TX, "link", "add", IF_TX, "address", MAC_TX, "type", "veth",
        "peer", "name", IF_RX, "address", MAC_RX, "netns", NS_RX)
    # Deterministic IPv6 headers: no flow label derived from the per-boot flow hash.
    run("ip", "netns", "exec", NS_TX, "sysctl", "-qw", "net.ipv6.auto_flowlabels=0")
    for ns, ifname, v4, v6, peer_v4, peer_v6, peer_mac in (
            (NS_TX, IF_TX, V4_TX, V6_TX, V4_RX, V6_RX, MAC_RX),
            (NS_RX, IF_RX, V4_RX, V6_RX, V4_TX, V6_TX, MAC_TX)):
        run("ip", "-n", ns, "addr", "add", f"{v4}/24", "dev", ifname)
        run("ip", "-n", ns, "addr", "add", f"{v6}/64", "dev", ifname, "nodad")
        run("ip", "-n", ns, "link", "set", ifname, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "neigh", "replace", peer_v4, "lladdr", peer_mac, "dev", ifname,
            "nud", "permanent")
        run("ip", "-n", ns, "neigh", "replace", peer_v6, "lladdr", peer_mac, "dev", ifname,
            "nud", "permanent")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="header to write")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("capture_partial.py needs root (network namespaces, AF_PACKET)")

    sockets = []
    try:
        setup()
        with InNetns(NS_RX):
            rx_index = socket.if_nametoindex(IF_RX)
            cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            cap.bind((IF_RX, ETH_P_ALL))
            sink4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sink4.bind((V4_RX, DPORT))
            sink6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            sink6.bind((V6_RX, DPORT))
            sockets += [cap, sink4, sink6]
        print(f"capturing on {NS_RX}/{IF_RX} (ifindex {rx_index})")

        with InNetns(NS_TX):
            send(socket.AF_INET, V4_TX, V4_RX, PAYLOAD_V4)
        partial_v4 = capture(cap, socket.AF_INET, PAYLOAD_V4)
        expect_delivered(sink4, PAYLOAD_V4)

        with InNetns(NS_TX):
            send(socket.AF_INET6, V6_TX, V6_RX, PAYLOAD_V6)
        partial_v6 = capture(cap, socket.AF_INET6, PAYLOAD_V6)
        expect_delivered(sink6, PAYLOAD_V6)

        run("ip", "netns", "exec", NS_TX, sys.executable, os.path.join(HERE, "tx_csum_off.py"),
            IF_TX)
        with InNetns(NS_TX):
            send(socket.AF_INET, V4_TX, V4_RX, PAYLOAD_V4)
        full_v4 = capture(cap, socket.AF_INET, PAYLOAD_V4)
        expect_delivered(sink4, PAYLOAD_V4)
    finally:
        for s in sockets:
            s.close()
        for ns in (NS_TX, NS_RX):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)

    results = []
    for name, frame, partial in (("kCapturedPartialV4", partial_v4, True),
                                 ("kCapturedPartialV6", partial_v6, True),
                                 ("kCapturedFullV4", full_v4, False)):
        field, pseudo = check(frame, partial)
        results.append((name, frame, field, pseudo))
        print(f"{name}: {len(frame)} bytes, UDP checksum field {field:#06x}, "
              f"pseudo-header sum {pseudo:#06x} ({'partial' if partial else 'full, verifies'})")
        print(hexdump(frame))
    # Same addresses and UDP segment but for the checksum (the IPv4 ID, and with it the header
    # checksum, differs from datagram to datagram).
    same = [(f[1], f[2], f[4][:6] + f[4][8:]) for f in map(parse_udp, (partial_v4, full_v4))]
    if same[0] != same[1]:
        raise RuntimeError("the full-checksum frame is not the same datagram as the partial one")

    kernel = platform.release()
    today = datetime.date.today().isoformat()
    mac = f"{MAC_TX} -> {MAC_RX}"
    comments = {
        "kCapturedPartialV4": [
            f"IPv4 UDP {V4_TX}:{SPORT} -> {V4_RX}:{DPORT} ({mac}),",
            f"payload \"{PAYLOAD_V4.decode()}\", tx checksum offload on (CHECKSUM_PARTIAL):",
            f"UDP checksum field {results[0][2]:#06x} = the folded pseudo-header sum."],
        "kCapturedPartialV6": [
            f"IPv6 UDP [{V6_TX}]:{SPORT} -> [{V6_RX}]:{DPORT} ({mac}),",
            f"payload \"{PAYLOAD_V6.decode()}\", tx checksum offload on (CHECKSUM_PARTIAL):",
            f"UDP checksum field {results[1][2]:#06x} = the folded pseudo-header sum."],
        "kCapturedFullV4": [
            f"The datagram of kCapturedPartialV4 ({V4_TX}:{SPORT} -> {V4_RX}:{DPORT}) again, "
            "offload off:",
            f"complete UDP checksum {results[2][2]:#06x} (IPv4 ID and header checksum differ)."],
    }
    text = "\n".join([
        "// UDP frames as the kernel built them, captured from a veth (CHECKSUM_PARTIAL, full).",
        f"// Regenerated by tests/lab/capture_partial.py on {today}, kernel {kernel}.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace ferry::packet::test {",
        "",
        "\n\n".join(cxx_array(name, comments[name], frame) for name, frame, _, _ in results),
        "",
        "}  // namespace ferry::packet::test",
        ""])
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(args.out, ROOT)}")


if __name__ == "__main__":
    main()
