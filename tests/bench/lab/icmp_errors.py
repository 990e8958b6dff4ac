#!/usr/bin/env python3
"""The lab bench's ICMP row: writes a trafgen config of ICMP port-unreachable errors, one packet per
flow, as a backend sends them when its port is closed: from the backend to the client, quoting the
datagram the gateway forwarded to it (client:sport -> backend:port, TTL one less than the client's,
the whole 64-byte datagram quoted as Linux does when it fits in 576 bytes). Every checksum (outer
IPv4, ICMP, quoted IPv4 and UDP) is complete, as a real stack writes them. trafgen sends the packets
of the config in turn, so the flows cycle like the UDP rows' source ports.

Usage: icmp_errors.py DST_MAC SRC_MAC BACKEND CLIENT PORT FIRST_SPORT FLOWS >config
"""
import ipaddress
import struct
import sys


def fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    return ~fold(sum(struct.unpack(f"!{len(data) // 2}H", data))) & 0xFFFF


def ipv4(src: bytes, dst: bytes, proto: int, ttl: int, ident: int, payload: bytes) -> bytes:
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0, ttl, proto, 0, src, dst)
    return head[:10] + struct.pack("!H", checksum(head)) + head[12:] + payload


def udp(src: bytes, dst: bytes, sport: int, dport: int, data: bytes) -> bytes:
    length = 8 + len(data)
    pseudo = src + dst + struct.pack("!BBH", 0, 17, length)
    head = struct.pack("!HHHH", sport, dport, length, 0)
    return struct.pack("!HHHH", sport, dport, length, checksum(pseudo + head + data) or 0xFFFF) + data


def main() -> None:
    dst_mac, src_mac, backend, client, port, first, flows = sys.argv[1:8]
    b, c = ipaddress.IPv4Address(backend).packed, ipaddress.IPv4Address(client).packed
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\x08\x00"
    for i in range(int(flows)):
        sport = int(first) + i
        # The client's 64-byte frame: 14 + 20 + 8 + 22 bytes of data; the backend got it at TTL 63.
        quoted = ipv4(c, b, 17, 63, sport, udp(c, b, sport, int(port), b"A" * 22))
        body = struct.pack("!BBHI", 3, 3, 0, 0) + quoted
        icmp = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
        frame = eth + ipv4(b, c, 1, 64, 0x4000 + i, icmp)
        print("{ " + ", ".join(f"0x{x:02x}" for x in frame) + " }")


if __name__ == "__main__":
    main()
