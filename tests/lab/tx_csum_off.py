#!/usr/bin/env python3
"""Turns transmit checksum offload off on one interface (SIOCETHTOOL / ETHTOOL_STXCSUM, so no
ethtool binary is needed).

    tx_csum_off.py IFACE      (run inside the interface's namespace)

A veth sender with offload on hands frames whose UDP checksum is only the pseudo-header sum
(CHECKSUM_PARTIAL); AF_XDP copy mode passes them to user space as they are, and ferry's
incremental checksum update cannot finish them. A real NIC's peer always sends complete checksums,
so the lab's senders must too (docs/fastpath.md)."""
import ctypes
import fcntl
import socket
import struct
import sys

ETHTOOL_STXCSUM = 0x17
SIOCETHTOOL = 0x8946

value = ctypes.create_string_buffer(struct.pack("II", ETHTOOL_STXCSUM, 0))
ifreq = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(value)).ljust(40, b"\0")
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)
