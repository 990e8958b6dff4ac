// Test frames for the IP-hop tests, built byte by byte with frame_builder.hh's naive RFC 1071 sum
// (independent of lib/packet): fragments of a built datagram, ICMP(v6) errors quoting any bytes,
// and the from-scratch checksums the tests compare with.
#pragma once

#include <cstdint>
#include <vector>

#include "tests/unit/packet/frame_builder.hh"

namespace ferry::packet::test {

using Bytes = std::vector<std::uint8_t>;

inline Bytes slice(const Bytes& b, std::size_t from, std::size_t count) {
  return Bytes(b.begin() + static_cast<std::ptrdiff_t>(from),
               b.begin() + static_cast<std::ptrdiff_t>(from + count));
}

// The IPv4 header checksum of the `header_bytes` at `l3`, the checksum field taken as zero.
inline std::uint16_t reference_ipv4_checksum(const Bytes& f, std::size_t l3,
                                             std::size_t header_bytes) {
  Bytes header = slice(f, l3, header_bytes);
  header[10] = header[11] = 0;
  return static_cast<std::uint16_t>(~reference_sum(header));
}

inline void fix_ipv4_checksum(Bytes& f, std::size_t l3) {
  put16(f, l3 + 10, reference_ipv4_checksum(f, l3, (f[l3] & 0x0f) * 4u));
}

// The IP packet of a built frame, from its IP header on (what an ICMP error quotes).
inline Bytes ip_packet(const BuiltFrame& b) {
  return Bytes(b.bytes.begin() + static_cast<std::ptrdiff_t>(b.l3_offset), b.bytes.end());
}

// The IPv4 fragment holding [offset, offset + data) of the IP payload of `whole` (an unfragmented
// IPv4 frame), its header copied with total length, flags, offset and checksum set.
inline Bytes ipv4_fragment(const BuiltFrame& whole, std::size_t offset, std::size_t data,
                           bool more) {
  std::size_t l3 = whole.l3_offset;
  std::size_t header = whole.l4_offset - l3;
  Bytes f = slice(whole.bytes, 0, whole.l4_offset);
  Bytes part = slice(whole.bytes, whole.l4_offset + offset, data);
  f.insert(f.end(), part.begin(), part.end());
  put16(f, l3 + 2, static_cast<std::uint16_t>(header + data));
  put16(f, l3 + 6, static_cast<std::uint16_t>((more ? 0x2000 : 0) | offset / 8));
  fix_ipv4_checksum(f, l3);
  return f;
}

// The IPv6 fragment of [offset, offset + data) of `whole`'s payload (an IPv6 frame without
// extension headers): the fixed header with next header 44, then the Fragment header.
inline Bytes ipv6_fragment(const BuiltFrame& whole, std::size_t offset, std::size_t data, bool more,
                           std::uint32_t id) {
  std::size_t l3 = whole.l3_offset;
  Bytes f = slice(whole.bytes, 0, whole.l4_offset);
  std::uint8_t next = f[l3 + 6];
  f[l3 + 6] = 44;
  put16(f, l3 + 4, static_cast<std::uint16_t>(8 + data));
  f.insert(f.end(), {next, 0, static_cast<std::uint8_t>(offset >> 8),
                     static_cast<std::uint8_t>((offset & 0xf8) | (more ? 1 : 0)),
                     static_cast<std::uint8_t>(id >> 24), static_cast<std::uint8_t>(id >> 16),
                     static_cast<std::uint8_t>(id >> 8), static_cast<std::uint8_t>(id)});
  Bytes part = slice(whole.bytes, whole.l4_offset + offset, data);
  f.insert(f.end(), part.begin(), part.end());
  return f;
}

// An ICMP or ICMPv6 error from `src` to `dst` quoting `quote`, every checksum the naive one.
struct IcmpSpec {
  IpVersion version = IpVersion::v4;
  std::array<std::uint8_t, 16> src = addr("10.0.1.2");
  std::array<std::uint8_t, 16> dst = addr("192.0.2.1");
  std::uint8_t type = 3;
  std::uint8_t code = 3;
  std::uint32_t word = 0;        // the ICMP header's second 32-bit word (MTU, pointer, unused)
  std::uint16_t ip_id = 0x04d2;  // IPv4 identification, as in ip_hop_vectors.hh
  Bytes quote;
  std::vector<std::uint16_t> vlan_ids;  // 802.1Q tags, outermost first
};

// The ICMP message's sum with its checksum field as stored, and the ICMPv6 pseudo-header: 0xffff
// when the checksum verifies.
inline std::uint16_t reference_icmp_sum(const Bytes& f, std::size_t l3, std::size_t icmp,
                                        std::size_t icmp_bytes, bool v4) {
  Bytes sum;
  if (!v4) {
    Bytes src = slice(f, l3 + 8, 16), dst = slice(f, l3 + 24, 16);
    sum.insert(sum.end(), src.begin(), src.end());
    sum.insert(sum.end(), dst.begin(), dst.end());
    sum.insert(sum.end(), {0, 0, static_cast<std::uint8_t>(icmp_bytes >> 8),
                           static_cast<std::uint8_t>(icmp_bytes), 0, 0, 0, 58});
  }
  Bytes message = slice(f, icmp, icmp_bytes);
  sum.insert(sum.end(), message.begin(), message.end());
  return reference_sum(sum);
}

inline BuiltFrame build_icmp_frame(const IcmpSpec& s) {
  BuiltFrame out;
  Bytes& f = out.bytes;
  f = {0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0x01, 0x01};
  for (std::uint16_t vid : s.vlan_ids) {
    f.insert(f.end(),
             {0x81, 0x00, static_cast<std::uint8_t>(vid >> 8), static_cast<std::uint8_t>(vid)});
  }
  bool v4 = s.version == IpVersion::v4;
  f.insert(f.end(), {static_cast<std::uint8_t>(v4 ? 0x08 : 0x86),
                     static_cast<std::uint8_t>(v4 ? 0x00 : 0xdd)});
  std::size_t l3 = out.l3_offset = f.size();
  std::size_t icmp_bytes = 8 + s.quote.size();
  if (v4) {
    f.resize(l3 + 20, 0);
    f[l3] = 0x45;
    put16(f, l3 + 2, static_cast<std::uint16_t>(20 + icmp_bytes));
    put16(f, l3 + 4, s.ip_id);
    f[l3 + 8] = 64;
    f[l3 + 9] = 1;
    std::copy(s.src.begin(), s.src.begin() + 4, f.begin() + static_cast<std::ptrdiff_t>(l3 + 12));
    std::copy(s.dst.begin(), s.dst.begin() + 4, f.begin() + static_cast<std::ptrdiff_t>(l3 + 16));
    fix_ipv4_checksum(f, l3);
  } else {
    f.resize(l3 + 40, 0);
    f[l3] = 0x60;
    put16(f, l3 + 4, static_cast<std::uint16_t>(icmp_bytes));
    f[l3 + 6] = 58;
    f[l3 + 7] = 64;
    std::copy(s.src.begin(), s.src.end(), f.begin() + static_cast<std::ptrdiff_t>(l3 + 8));
    std::copy(s.dst.begin(), s.dst.end(), f.begin() + static_cast<std::ptrdiff_t>(l3 + 24));
  }
  std::size_t icmp = out.l4_offset = f.size();
  f.insert(f.end(), {s.type, s.code, 0, 0, static_cast<std::uint8_t>(s.word >> 24),
                     static_cast<std::uint8_t>(s.word >> 16),
                     static_cast<std::uint8_t>(s.word >> 8), static_cast<std::uint8_t>(s.word)});
  f.insert(f.end(), s.quote.begin(), s.quote.end());
  put16(f, icmp + 2, static_cast<std::uint16_t>(~reference_icmp_sum(f, l3, icmp, icmp_bytes, v4)));
  return out;
}

// The IP packet quoted at `quoted_l3` of `f` (up to the frame's end) as a frame of its own, with
// `f`'s L2 header, so that parse_frame() and reference_checksums() can look at it.
inline Bytes quoted_as_frame(const Bytes& f, std::size_t l3, std::size_t quoted_l3) {
  Bytes out = slice(f, 0, l3);
  out.insert(out.end(), f.begin() + static_cast<std::ptrdiff_t>(quoted_l3), f.end());
  return out;
}

}  // namespace ferry::packet::test
