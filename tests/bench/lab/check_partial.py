#!/usr/bin/env python3
"""run.sh's check that its "partial" frames are what a local stack sends: captures on the
gateway's veth (AF_PACKET, before anything is attached to it) one datagram from an ordinary UDP
socket in the client's namespace (its veth with the default offloads, so CHECKSUM_PARTIAL) and one
frame trafgen sends from the config run.sh wrote, both to the same destination with the same
size, and fails unless both carry the same UDP checksum field and length, and that field is the
pseudo-header sum (folded, not complemented).

    check_partial.py CLIENT_NS GATEWAY_NS GATEWAY_IF CLIENT_IF SRC DST DPORT SIZE TRAFGEN_CONF"""
import ctypes
import os
import socket
import struct
import subprocess
import sys

client_ns, gw_ns, gw_if, client_if, src, dst = sys.argv[1:7]
dport, size, conf = int(sys.argv[7]), int(sys.argv[8]), sys.argv[9]
libc = ctypes.CDLL(None, use_errno=True)


def setns(name):
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
    finally:
        os.close(fd)


def pseudo_sum(udp_length):
    total = sum(struct.unpack("!4H", socket.inet_aton(src) + socket.inet_aton(dst))) + 17 + udp_length
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def capture(cap):
    """(UDP checksum field, UDP length, frame length) of the next frame src -> dst:dport."""
    while True:
        f = cap.recv(65535)
        ip = f[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] == 17 and ip[12:16] == socket.inet_aton(src) and ip[16:20] == socket.inet_aton(dst):
            _, dp, length, csum = struct.unpack("!HHHH", ip[ihl:ihl + 8])
            if dp == dport:
                return csum, length, len(f)


home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
setns(gw_ns)
cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
cap.bind((gw_if, 0))
cap.settimeout(3)
setns(client_ns)
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.sendto(b"A" * (size - 42), (dst, dport))
if libc.setns(home, 0x40000000) != 0:
    raise OSError(ctypes.get_errno(), "setns back")
stack = capture(cap)
subprocess.run(["ip", "netns", "exec", client_ns, "trafgen", "--dev", client_if, "--conf", conf,
                "--cpus", "1", "-n", "1", "-q"], check=True, capture_output=True)
generated = capture(cap)
expected = pseudo_sum(size - 34)
line = (f"partial checksum, {size} B to {dst}: local UDP socket 0x{stack[0]:04x}, trafgen "
        f"0x{generated[0]:04x}, pseudo-header sum 0x{expected:04x}")
if stack != generated or stack[0] != expected or stack[2] != size:
    sys.exit(f"check_partial.py: mismatch: {line} (checksum, UDP length, frame length: "
             f"socket {stack}, trafgen {generated})")
print(line)
