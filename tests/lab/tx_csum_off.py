#!/usr/bin/env python3
"""Turns transmit checksum offload off on one interface (SIOCETHTOOL / ETHTOOL_STXCSUM, so no
ethtool binary is needed).

    tx_csum_off.py IFACE      (run inside the interface's namespace)

A veth keeps transmit checksum offload on by default: UDP its local stack sends carries only the
pseudo-header sum (CHECKSUM_PARTIAL), which is what containers, pods, VMs and local backends send,
and what ferry's labs send. With offload off the stack writes complete checksums, as frames from
a real NIC carry them: capture_partial.py uses this to capture such a frame beside the partial
ones (the integration tests' variant of the same is fastpath_lab.Lab(tx_checksum_offload=False))."""
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
