// ICMP and ICMPv6 errors about UDP datagrams: parse_icmp_error() and the NAT translation of
// translate_icmp_error(). Every field the translation touches sits at an even offset from the
// ICMP header (the quote starts 8 bytes in, IP headers are 4-byte multiples), so one 16-bit
// ChecksumDelta serves the quoted headers and the ICMP message alike.
#include "lib/packet/icmp.hh"

#include <algorithm>
#include <cstring>

#include "lib/packet/checksum.hh"
#include "lib/packet/fragment.hh"

namespace ferry::packet {
namespace {

bool is_icmp4_error(std::uint8_t type) {
  return type == kIcmpDestinationUnreachable || type == kIcmpTimeExceeded ||
         type == kIcmpParameterProblem;
}

bool is_icmp6_error(std::uint8_t type) {
  return type == kIcmp6DestinationUnreachable || type == kIcmp6PacketTooBig ||
         type == kIcmp6TimeExceeded || type == kIcmp6ParameterProblem;
}

// The quoted IPv4 header at e.quoted_l3_offset, `quote_bytes` of it in the frame: its length,
// addresses and where the UDP header starts. `total` gets the quoted total length.
IcmpParse parse_quoted_ipv4(const std::uint8_t* frame, std::uint32_t quote_bytes, IcmpError& e,
                            std::uint32_t& total) {
  const std::uint8_t* ip = frame + e.quoted_l3_offset;
  if (quote_bytes < kIpv4MinHeaderBytes || (ip[0] >> 4) != 4) return IcmpParse::malformed;
  std::uint32_t header_bytes = (ip[0] & 0x0f) * 4u;
  if (header_bytes < kIpv4MinHeaderBytes) return IcmpParse::malformed;
  total = load_be16(ip + 2);
  if ((load_be16(ip + 6) & 0x1fff) != 0) return IcmpParse::not_udp;  // a later fragment
  if (ip[9] != IPPROTO_UDP) return IcmpParse::not_udp;
  e.quoted_l3_header_bytes = header_bytes;
  store_address(e.quoted_src, ip + 12, true);
  store_address(e.quoted_dst, ip + 16, true);
  return IcmpParse::error;
}

// The quoted IPv6 fixed header, and a Fragment header behind it when there is one: only the first
// fragment (offset 0) of a UDP datagram has the ports.
IcmpParse parse_quoted_ipv6(const std::uint8_t* frame, std::uint32_t quote_bytes, IcmpError& e,
                            std::uint32_t& total) {
  const std::uint8_t* ip = frame + e.quoted_l3_offset;
  if (quote_bytes < kIpv6HeaderBytes || (ip[0] >> 4) != 6) return IcmpParse::malformed;
  total = kIpv6HeaderBytes + load_be16(ip + 4);
  std::uint32_t header_bytes = kIpv6HeaderBytes;
  std::uint8_t next = ip[6];
  if (next == kIpv6NextHeaderFragment) {
    if (quote_bytes < kIpv6HeaderBytes + kIpv6FragmentHeaderBytes) return IcmpParse::malformed;
    const std::uint8_t* fragment = ip + kIpv6HeaderBytes;
    if ((load_be16(fragment + 2) & 0xfff8) != 0) return IcmpParse::not_udp;
    next = fragment[0];
    header_bytes += kIpv6FragmentHeaderBytes;
  }
  if (next != IPPROTO_UDP) return IcmpParse::not_udp;
  e.quoted_l3_header_bytes = header_bytes;
  store_address(e.quoted_src, ip + 8, false);
  store_address(e.quoted_dst, ip + 24, false);
  return IcmpParse::error;
}

}  // namespace

IcmpParse parse_icmp_error(ConstFrameBytes frame, const ParsedPacket& outer,
                           IcmpError& e) noexcept {
  const std::uint8_t* bytes = frame.data();
  bool v4 = outer.is_v4();
  int icmp_protocol = v4 ? int{IPPROTO_ICMP} : int{IPPROTO_ICMPV6};
  if (outer.protocol != icmp_protocol) return IcmpParse::not_an_error;
  // `outer` is parse_frame()'s; a mismatched one reads nothing outside the frame all the same.
  if (outer.l4_offset < outer.l3_offset + (v4 ? kIpv4MinHeaderBytes : kIpv6HeaderBytes) ||
      outer.l4_offset > frame.size() || frame.size() - outer.l4_offset < outer.l4_bytes) {
    return IcmpParse::malformed;
  }
  // An ICMP error cut into IPv4 fragments (it would have to be longer than 576 bytes): the kernel
  // reassembles it.
  if (v4 && (load_be16(bytes + outer.l3_offset + 6) & 0x3fff) != 0) return IcmpParse::not_an_error;
  e = IcmpError{};
  e.icmp_offset = outer.l4_offset;
  e.icmp_bytes = outer.l4_bytes;
  if (e.icmp_bytes < kIcmpHeaderBytes) return IcmpParse::malformed;
  e.type = bytes[e.icmp_offset];
  e.code = bytes[e.icmp_offset + 1];
  if (!(v4 ? is_icmp4_error(e.type) : is_icmp6_error(e.type))) return IcmpParse::not_an_error;

  e.quoted_l3_offset = e.icmp_offset + kIcmpHeaderBytes;
  std::uint32_t quote_bytes = e.icmp_bytes - kIcmpHeaderBytes;
  std::uint32_t total = 0;
  IcmpParse r = v4 ? parse_quoted_ipv4(bytes, quote_bytes, e, total)
                   : parse_quoted_ipv6(bytes, quote_bytes, e, total);
  if (r != IcmpParse::error) return r;
  // RFC 792 and RFC 4443 quote the header and at least 8 bytes beyond it: the whole UDP header.
  // The quoted datagram's own length must hold those too. Bytes quoted past its total length
  // (RFC 4884 zero padding and extensions) are not part of it.
  std::uint32_t needed = e.quoted_l3_header_bytes + kUdpHeaderBytes;
  if (quote_bytes < needed || total < needed) return IcmpParse::malformed;
  e.quoted_l4_offset = e.quoted_l3_offset + e.quoted_l3_header_bytes;
  e.quoted_l4_bytes = std::min(quote_bytes, total) - e.quoted_l3_header_bytes;
  e.quoted_src_port = load_be16(bytes + e.quoted_l4_offset);
  e.quoted_dst_port = load_be16(bytes + e.quoted_l4_offset + 2);
  return IcmpParse::error;
}

void translate_icmp_error(FrameBytes frame, ParsedPacket& outer, IcmpError& e, Side quoted_side,
                          const std::array<std::uint8_t, 16>& address, std::uint16_t port,
                          Side outer_side,
                          const std::array<std::uint8_t, 16>& outer_address) noexcept {
  std::uint8_t* f = frame.data();
  bool v4 = outer.is_v4();
  std::uint32_t n = outer.address_bytes();
  bool quoted_source = quoted_side == Side::source;
  std::uint8_t* quoted_address = f + e.quoted_l3_offset + (quoted_source ? 0 : n) + (v4 ? 12 : 8);
  std::uint8_t* quoted_port = f + e.quoted_l4_offset + (quoted_source ? 0 : 2);
  std::uint8_t* quoted_udp_checksum = f + e.quoted_l4_offset + 6;

  // What the ICMP checksum covers changes by every word written below, checksums included.
  ChecksumDelta address_delta;
  address_delta.replace(quoted_address, address.data(), n);
  ChecksumDelta icmp_delta = address_delta;
  icmp_delta.replace16(load_be16(quoted_port), port);
  if (v4) {
    std::uint8_t* at = f + e.quoted_l3_offset + 10;
    std::uint16_t old_checksum = load_be16(at);
    std::uint16_t new_checksum = address_delta.apply(old_checksum);
    store_be16(at, new_checksum);
    icmp_delta.replace16(old_checksum, new_checksum);
  }
  // The quoted UDP checksum covers the sender's whole datagram, of which only the start is quoted:
  // it is updated all the same, so a sender that checks it finds its own datagram.
  if (std::uint16_t old_checksum = load_be16(quoted_udp_checksum); old_checksum != 0) {
    ChecksumDelta udp_delta = address_delta;
    udp_delta.replace16(load_be16(quoted_port), port);
    std::uint16_t new_checksum = udp_delta.apply(old_checksum);
    if (new_checksum == 0) new_checksum = 0xffff;  // 0 would mean "no checksum" (RFC 768)
    store_be16(quoted_udp_checksum, new_checksum);
    icmp_delta.replace16(old_checksum, new_checksum);
  }
  std::memcpy(quoted_address, address.data(), n);
  store_be16(quoted_port, port);
  store_address(quoted_source ? e.quoted_src : e.quoted_dst, address.data(), v4);
  (quoted_source ? e.quoted_src_port : e.quoted_dst_port) = port;

  std::uint8_t* outer_at =
      f + (outer_side == Side::source ? outer.src_address_offset() : outer.dst_address_offset());
  ChecksumDelta outer_delta;
  outer_delta.replace(outer_at, outer_address.data(), n);
  if (v4) {
    std::uint8_t* at = f + outer.l3_offset + 10;
    store_be16(at, outer_delta.apply(load_be16(at)));
  } else {
    icmp_delta.replace(outer_at, outer_address.data(), n);  // ICMPv6's pseudo-header
  }
  std::memcpy(outer_at, outer_address.data(), n);
  store_address(outer_side == Side::source ? outer.src_address : outer.dst_address,
                outer_address.data(), v4);

  std::uint8_t* icmp_checksum = f + e.icmp_offset + 2;
  store_be16(icmp_checksum, icmp_delta.apply(load_be16(icmp_checksum)));
  // parse_frame() leaves the transport fields of an ICMP frame as they were; in step for route().
  outer.src_port = outer.dst_port = 0;
  outer.payload_offset = e.icmp_offset + kIcmpHeaderBytes;
  outer.payload_bytes = e.icmp_bytes - kIcmpHeaderBytes;
}

}  // namespace ferry::packet
