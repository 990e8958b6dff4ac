// Builds test frames (any VLAN stack, IPv4 with options or IPv6, UDP or TCP) with checksums from
// a deliberately naive RFC 1071 implementation, independent of lib/packet's.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet::test {

inline std::array<std::uint8_t, 16> addr(const std::string& text) {
  auto a = net::IpAddress::parse(text);
  if (!a) throw std::invalid_argument("bad address " + text);
  return a->bytes;
}

// One 16-bit word at a time, folding after every addition: RFC 1071 as written, nothing clever.
inline std::uint16_t reference_sum(const std::vector<std::uint8_t>& bytes) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < bytes.size(); i += 2) {
    std::uint32_t word = bytes[i] << 8;
    if (i + 1 < bytes.size()) word |= bytes[i + 1];
    sum += word;
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<std::uint16_t>(sum);
}

struct FrameSpec {
  std::vector<std::uint16_t> vlan_tpids;  // outermost first; same length as vlan_ids
  std::vector<std::uint16_t> vlan_ids;
  IpVersion version = IpVersion::v4;
  std::array<std::uint8_t, 16> src = addr("192.0.2.1");
  std::array<std::uint8_t, 16> dst = addr("10.0.0.10");
  std::uint8_t protocol = IPPROTO_UDP;
  std::uint8_t hop_limit = 64;
  std::uint16_t src_port = 40000;
  std::uint16_t dst_port = 53;
  std::vector<std::uint8_t> payload = {'p', 'i', 'n', 'g'};
  std::uint32_t ipv4_option_bytes = 0;  // multiple of 4, <= 40
  std::uint32_t tcp_option_bytes = 0;   // multiple of 4, <= 40
  bool udp_no_checksum = false;         // send 0 ("no checksum")
  bool partial_checksum = false;        // the pseudo-header sum only (CHECKSUM_PARTIAL, veth)
  std::uint32_t pad_to_bytes = 0;       // Ethernet padding after the IP packet
  std::array<std::uint8_t, 6> dst_mac = {0x02, 0, 0, 0, 0, 0x02};
  std::array<std::uint8_t, 6> src_mac = {0x02, 0, 0, 0, 0, 0x01};
};

struct BuiltFrame {
  std::vector<std::uint8_t> bytes;
  std::size_t l3_offset = 0;
  std::size_t l4_offset = 0;
};

inline void put16(std::vector<std::uint8_t>& v, std::size_t at, std::uint16_t x) {
  v[at] = static_cast<std::uint8_t>(x >> 8);
  v[at + 1] = static_cast<std::uint8_t>(x);
}

inline BuiltFrame build_frame(const FrameSpec& s) {
  BuiltFrame out;
  auto& f = out.bytes;
  f.insert(f.end(), s.dst_mac.begin(), s.dst_mac.end());
  f.insert(f.end(), s.src_mac.begin(), s.src_mac.end());
  for (std::size_t i = 0; i < s.vlan_ids.size(); ++i) {
    f.push_back(static_cast<std::uint8_t>(s.vlan_tpids[i] >> 8));
    f.push_back(static_cast<std::uint8_t>(s.vlan_tpids[i]));
    f.push_back(static_cast<std::uint8_t>(s.vlan_ids[i] >> 8));
    f.push_back(static_cast<std::uint8_t>(s.vlan_ids[i]));
  }
  bool v4 = s.version == IpVersion::v4;
  std::uint16_t ethertype = v4 ? 0x0800 : 0x86dd;
  f.push_back(static_cast<std::uint8_t>(ethertype >> 8));
  f.push_back(static_cast<std::uint8_t>(ethertype));
  out.l3_offset = f.size();

  bool udp = s.protocol == IPPROTO_UDP;
  std::size_t l4_header = udp ? 8 : 20 + s.tcp_option_bytes;
  std::size_t l4_len = l4_header + s.payload.size();
  std::size_t ip_header = v4 ? 20 + s.ipv4_option_bytes : 40;
  std::size_t l3 = out.l3_offset;
  f.resize(l3 + ip_header, 0);
  if (v4) {
    f[l3] = static_cast<std::uint8_t>(0x40 | (ip_header / 4));
    put16(f, l3 + 2, static_cast<std::uint16_t>(ip_header + l4_len));
    put16(f, l3 + 4, 0xbeef);  // identification
    f[l3 + 8] = s.hop_limit;
    f[l3 + 9] = s.protocol;
    for (int i = 0; i < 4; ++i) {
      f[l3 + 12 + i] = s.src[i];
      f[l3 + 16 + i] = s.dst[i];
    }
    for (std::size_t i = 20; i < ip_header; ++i) f[l3 + i] = 0x01;  // NOP options
    std::vector<std::uint8_t> header(f.begin() + l3, f.end());
    put16(f, l3 + 10, static_cast<std::uint16_t>(~reference_sum(header)));
  } else {
    f[l3] = 0x60;
    put16(f, l3 + 4, static_cast<std::uint16_t>(l4_len));
    f[l3 + 6] = s.protocol;
    f[l3 + 7] = s.hop_limit;
    for (int i = 0; i < 16; ++i) {
      f[l3 + 8 + i] = s.src[i];
      f[l3 + 24 + i] = s.dst[i];
    }
  }
  out.l4_offset = f.size();
  std::size_t l4 = out.l4_offset;
  f.resize(l4 + l4_header, 0);
  put16(f, l4, s.src_port);
  put16(f, l4 + 2, s.dst_port);
  if (udp) {
    put16(f, l4 + 4, static_cast<std::uint16_t>(l4_len));
  } else {
    put16(f, l4 + 4, 0x0102);  // sequence number
    f[l4 + 12] = static_cast<std::uint8_t>((l4_header / 4) << 4);
    f[l4 + 13] = 0x18;  // PSH ACK
    put16(f, l4 + 14, 1024);
    for (std::size_t i = 20; i < l4_header; ++i) f[l4 + i] = 0x01;
  }
  f.insert(f.end(), s.payload.begin(), s.payload.end());

  // Pseudo-header (RFC 768 / RFC 8200 8.1) followed by the L4 bytes.
  std::vector<std::uint8_t> pseudo;
  std::size_t n = v4 ? 4 : 16;
  pseudo.insert(pseudo.end(), s.src.begin(), s.src.begin() + n);
  pseudo.insert(pseudo.end(), s.dst.begin(), s.dst.begin() + n);
  if (v4) {
    pseudo.insert(pseudo.end(), {0, s.protocol, static_cast<std::uint8_t>(l4_len >> 8),
                                 static_cast<std::uint8_t>(l4_len)});
  } else {
    pseudo.insert(pseudo.end(), {0, 0, static_cast<std::uint8_t>(l4_len >> 8),
                                 static_cast<std::uint8_t>(l4_len), 0, 0, 0, s.protocol});
  }
  std::uint16_t pseudo_only = reference_sum(pseudo);
  pseudo.insert(pseudo.end(), f.begin() + l4, f.end());
  auto checksum = static_cast<std::uint16_t>(~reference_sum(pseudo));
  if (udp && checksum == 0) checksum = 0xffff;
  if (udp && s.udp_no_checksum) checksum = 0;
  if (s.partial_checksum) checksum = pseudo_only;
  put16(f, l4 + (udp ? 6 : 16), checksum);
  if (f.size() < s.pad_to_bytes) f.resize(s.pad_to_bytes, 0);
  return out;
}

// The checksums a frame should carry, recomputed from scratch with reference_sum().
struct ReferenceChecksums {
  std::uint16_t ipv4_header = 0;  // IPv4 only
  std::uint16_t l4 = 0;
};

inline ReferenceChecksums reference_checksums(const std::vector<std::uint8_t>& f,
                                              const ParsedPacket& p) {
  ReferenceChecksums r;
  std::size_t l3 = p.l3_offset;
  bool v4 = p.is_v4();
  if (v4) {
    std::vector<std::uint8_t> header(f.begin() + l3, f.begin() + p.l4_offset);
    header[10] = header[11] = 0;
    r.ipv4_header = static_cast<std::uint16_t>(~reference_sum(header));
  }
  bool udp = p.protocol == IPPROTO_UDP;
  std::size_t l4_len = udp ? (f[p.l4_offset + 4] << 8 | f[p.l4_offset + 5]) : p.l4_bytes;
  std::vector<std::uint8_t> pseudo;
  std::size_t n = v4 ? 4 : 16;
  pseudo.insert(pseudo.end(), f.begin() + p.src_address_offset(),
                f.begin() + p.src_address_offset() + n);
  pseudo.insert(pseudo.end(), f.begin() + p.dst_address_offset(),
                f.begin() + p.dst_address_offset() + n);
  pseudo.insert(pseudo.end(), {0, 0, static_cast<std::uint8_t>(l4_len >> 8),
                               static_cast<std::uint8_t>(l4_len), 0, 0, 0, p.protocol});
  std::vector<std::uint8_t> l4(f.begin() + p.l4_offset, f.begin() + p.l4_offset + l4_len);
  l4[udp ? 6 : 16] = l4[udp ? 7 : 17] = 0;
  pseudo.insert(pseudo.end(), l4.begin(), l4.end());
  r.l4 = static_cast<std::uint16_t>(~reference_sum(pseudo));
  if (udp && r.l4 == 0) r.l4 = 0xffff;
  return r;
}

inline std::uint16_t stored16(const std::vector<std::uint8_t>& f, std::size_t at) {
  return static_cast<std::uint16_t>(f[at] << 8 | f[at + 1]);
}

}  // namespace ferry::packet::test
