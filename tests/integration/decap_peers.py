"""The two ends of test_decap's lab, each run in its namespace on the tests' interpreter.

  decap_peers.py responder VIP4 VIP6 UDP_PORT TCP_PORT
      (backend) UDP sockets on VIP4 and VIP6 that answer each datagram with "echo:" + it and print
      "udp SRC SPORT PAYLOAD"; TCP listeners on both that print "tcp SRC SPORT" per connection.
      "ready" once all are bound.
  decap_peers.py send IFACE DST_MAC CASES_JSON
      (gateway) for each case, an encapsulated frame (built here, with the checksums a client's
      stack would give it) sent on IFACE; for cases with "await_reply", the answer from the VIP to
      the client awaited (10 s at most) on a packet socket opened before the send. One JSON line
      per case.
"""
import json
import select
import socket
import struct
import sys
import time

from inet_checksum import csum


def responder(vip4, vip6, udp_port, tcp_port):
    udp, tcp = [], []
    for family, vip in ((socket.AF_INET, vip4), (socket.AF_INET6, vip6)):
        u = socket.socket(family, socket.SOCK_DGRAM)
        u.bind((vip, udp_port))
        t = socket.socket(family, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.bind((vip, tcp_port))
        t.listen(16)
        udp.append(u)
        tcp.append(t)
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select(udp + tcp, [], [])
        for s in readable:
            if s in udp:
                data, peer = s.recvfrom(65535)
                print(f"udp {peer[0]} {peer[1]} {data.decode(errors='replace')}", flush=True)
                s.sendto(b"echo:" + data, peer)
            else:
                conn, peer = s.accept()
                print(f"tcp {peer[0]} {peer[1]}", flush=True)
                conn.close()


def ip_packet(src, dst, proto, payload):
    """An IPv4 or IPv6 header (by the addresses' family) with `payload` behind it."""
    if ":" in dst:
        return struct.pack("!IHBB16s16s", 6 << 28, len(payload), proto, 64,
                           socket.inet_pton(socket.AF_INET6, src),
                           socket.inet_pton(socket.AF_INET6, dst)) + payload
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, 64, proto, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
    header = header[:10] + struct.pack("!H", csum(header)) + header[12:]
    return header + payload


def transport(src, dst, proto, segment):
    """`segment` (UDP or TCP, checksum field zero) with its real checksum, as a client sends it."""
    family = socket.AF_INET6 if ":" in dst else socket.AF_INET
    pseudo = socket.inet_pton(family, src) + socket.inet_pton(family, dst) + \
        struct.pack("!IxxxB" if family == socket.AF_INET6 else "!xBH", *(
            (len(segment), proto) if family == socket.AF_INET6 else (proto, len(segment))))
    at = 6 if proto == socket.IPPROTO_UDP else 16
    value = csum(pseudo + segment) or 0xFFFF
    return segment[:at] + struct.pack("!H", value) + segment[at + 2:]


def inner_packet(case):
    if case.get("tcp_syn"):
        segment = struct.pack("!HHIIBBHHH", case["sport"], case["dport"], 1000, 0, 5 << 4, 0x02,
                              64240, 0, 0)
        proto = socket.IPPROTO_TCP
    else:
        data = case["payload"].encode()
        segment = struct.pack("!HHHH", case["sport"], case["dport"], 8 + len(data), 0) + data
        proto = socket.IPPROTO_UDP
    segment = transport(case["client"], case["vip"], proto, segment)
    return ip_packet(case["client"], case["vip"], proto, segment)


def frame(case, src_mac, dst_mac):
    inner = inner_packet(case)
    if case["form"] == "ipip":
        outer = ip_packet(case["outer_src"], case["outer_dst"], 4 if inner[0] >> 4 == 4 else 41,
                          inner)
    else:  # GUE variant 1: the inner packet is the UDP payload; checksum over IPv6, none over IPv4
        udp = struct.pack("!HHHH", case.get("gue_sport", 40000), case["gue_port"], 8 + len(inner),
                          0) + inner
        if ":" in case["outer_dst"]:
            udp = transport(case["outer_src"], case["outer_dst"], socket.IPPROTO_UDP, udp)
        outer = ip_packet(case["outer_src"], case["outer_dst"], socket.IPPROTO_UDP, udp)
    ethertype = 0x86DD if ":" in case["outer_dst"] else 0x0800
    return dst_mac + src_mac + struct.pack("!H", ethertype) + outer


def parse_reply(data):
    """(src, dst, proto, transport bytes) of an IPv4/IPv6 frame, or None."""
    ethertype = struct.unpack("!H", data[12:14])[0]
    if ethertype == 0x0800 and len(data) >= 34:
        ihl = (data[14] & 0xF) * 4
        return (socket.inet_ntoa(data[26:30]), socket.inet_ntoa(data[30:34]), data[23],
                data[14 + ihl:])
    if ethertype == 0x86DD and len(data) >= 54:
        return (socket.inet_ntop(socket.AF_INET6, data[22:38]),
                socket.inet_ntop(socket.AF_INET6, data[38:54]), data[20], data[54:])
    return None


def await_reply(sniffer, case, timeout_s=10):
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([sniffer], [], [], left)[0]:
            break
        data, addr = sniffer.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        parsed = parse_reply(data)
        if not parsed or parsed[0] != case["vip"] or parsed[1] != case["client"]:
            continue
        src, dst, proto, seg = parsed
        reply = {"src": src, "dst": dst, "sport": struct.unpack("!H", seg[0:2])[0],
                 "dport": struct.unpack("!H", seg[2:4])[0]}
        if proto == socket.IPPROTO_UDP:
            reply["payload"] = seg[8:].decode(errors="replace")
        elif proto == socket.IPPROTO_TCP:
            reply["flags"] = seg[13]
        return reply
    return None


def send(iface, dst_mac_text, cases):
    dst_mac = bytes.fromhex(dst_mac_text.replace(":", ""))
    with open(f"/sys/class/net/{iface}/address") as f:
        src_mac = bytes.fromhex(f.read().strip().replace(":", ""))
    sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    sniffer.bind((iface, 0))
    sender = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sender.bind((iface, 0))
    for case in cases:
        sender.send(frame(case, src_mac, dst_mac))
        reply = await_reply(sniffer, case) if case.get("await_reply") else None
        print(json.dumps({"name": case["name"], "reply": reply}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "responder":
        responder(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "send":
        send(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
