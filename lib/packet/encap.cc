// encapsulate(): the direct server return outer headers (IPIP, GUE variant 1), written into the
// headroom in front of a frame; and the per-flow outer IPv4 source.
#include "lib/packet/encap.hh"

#include <cstring>

#include "lib/packet/checksum.hh"

namespace ferry::packet {
namespace {

constexpr std::uint8_t kEcnMask = 0x03;
constexpr std::uint8_t kEcnCe = 0x03;
constexpr std::uint8_t kEcnEct0 = 0x02;
constexpr std::uint16_t kIpv4DontFragment = 0x4000;
constexpr std::uint32_t kMaxLengthField = 0xffff;
constexpr std::uint16_t kGueSourcePortBase = 0xc000;  // the ephemeral range, 49152..65535
constexpr std::uint16_t kGueSourcePortMask = 0x3fff;
constexpr std::uint32_t kFlowLabelMask = 0xfffff;

// What the outer header takes from the inner one.
struct InnerFacts {
  std::uint32_t header_bytes = 0;  // the inner IP header, options included
  std::uint8_t tos = 0;            // IPv4 TOS / IPv6 traffic class: DSCP and ECN
  bool dont_fragment = false;
};

// The inner packet is p's, whole in `frame`, with length fields that agree with p.l3_bytes: what
// is checked here is all encapsulate() reads or keeps, so a stale or mixed-up p cannot make it
// write outside `room` or wrap a part of a packet.
EncapError check_inner(ConstFrameBytes frame, const ParsedPacket& p, InnerFacts& out) {
  bool v4 = p.is_v4();
  std::uint32_t l3 = p.l3_offset;
  std::uint32_t l2_tags = l3 - kEthernetHeaderBytes;  // wraps for l3 < 14, caught below
  if (l3 < kEthernetHeaderBytes || l2_tags > kMaxVlanTags * kVlanTagBytes ||
      l2_tags % kVlanTagBytes != 0) {
    return EncapError::not_whole_packet;
  }
  if (p.l3_bytes < (v4 ? kIpv4MinHeaderBytes : kIpv6HeaderBytes) ||
      frame.size() < std::uint64_t{l3} + p.l3_bytes) {
    return EncapError::not_whole_packet;
  }
  const std::uint8_t* ip = frame.data() + l3;
  if (load_be16(ip - 2) != (v4 ? kEthertypeIpv4 : kEthertypeIpv6) ||
      ip[0] >> 4 != static_cast<std::uint8_t>(p.version)) {
    return EncapError::version_mismatch;
  }
  if (v4) {
    std::uint32_t ihl_bytes = (ip[0] & 0x0fu) * 4;
    if (ihl_bytes < kIpv4MinHeaderBytes || ihl_bytes > p.l3_bytes ||
        load_be16(ip + 2) != p.l3_bytes) {
      return EncapError::not_whole_packet;
    }
    out = {ihl_bytes, ip[1], (load_be16(ip + 6) & kIpv4DontFragment) != 0};
  } else {
    if (kIpv6HeaderBytes + load_be16(ip + 4) != p.l3_bytes) return EncapError::not_whole_packet;
    // An IPv6 packet is never fragmented on its way: its tunnel may not be either.
    out = {kIpv6HeaderBytes, static_cast<std::uint8_t>(load_be16(ip) >> 4), true};
  }
  return EncapError::none;
}

// RFC 6040 normal mode, as Linux's INET_ECN_encapsulate(): DSCP and ECN copied, but CE becomes
// ECT(0), so a congestion mark met before the tunnel is not counted again on the outer header.
std::uint8_t outer_tos(std::uint8_t inner) {
  std::uint8_t ecn = inner & kEcnMask;
  return static_cast<std::uint8_t>((inner & ~kEcnMask) | (ecn == kEcnCe ? kEcnEct0 : ecn));
}

void write_outer_ipv4(std::uint8_t* ip, std::uint32_t total_bytes, std::uint8_t tos,
                      bool dont_fragment, std::uint8_t protocol, const EncapHeader& h) {
  ip[0] = 0x45;
  ip[1] = tos;
  store_be16(ip + 2, static_cast<std::uint16_t>(total_bytes));
  store_be16(ip + 4, h.ip_id);
  store_be16(ip + 6, dont_fragment ? kIpv4DontFragment : 0);
  ip[8] = kEncapTtl;
  ip[9] = protocol;
  std::memcpy(ip + 12, h.source.bytes.data(), 4);
  std::memcpy(ip + 16, h.destination.bytes.data(), 4);
  store_be16(ip + 10, ipv4_header_checksum(ip, kIpv4MinHeaderBytes));
}

void write_outer_ipv6(std::uint8_t* ip, std::uint32_t payload_bytes, std::uint8_t traffic_class,
                      std::uint8_t next_header, const EncapHeader& h) {
  store_be32(ip, 0x60000000u | std::uint32_t{traffic_class} << 20 | (h.flow_hash & kFlowLabelMask));
  store_be16(ip + 4, static_cast<std::uint16_t>(payload_bytes));
  ip[6] = next_header;
  ip[7] = kEncapTtl;
  std::memcpy(ip + 8, h.source.bytes.data(), 16);
  std::memcpy(ip + 24, h.destination.bytes.data(), 16);
}

Encapsulated refused(EncapError e) {
  return {e, 0, 0};
}

}  // namespace

std::string_view to_string(EncapError e) {
  switch (e) {
    case EncapError::none:
      return "none";
    case EncapError::no_headroom:
      return "no_headroom";
    case EncapError::not_whole_packet:
      return "not_whole_packet";
    case EncapError::version_mismatch:
      return "version_mismatch";
    case EncapError::bad_outer:
      return "bad_outer";
    case EncapError::too_long:
      return "too_long";
  }
  return "unknown";
}

Encapsulated encapsulate(FrameBytes room, std::uint32_t frame_offset, ParsedPacket& p,
                         const EncapHeader& h) noexcept {
  bool outer_v6 = h.destination.family == AF_INET6;
  bool gue = h.kind == EncapKind::gue;
  std::uint32_t overhead = encap_overhead(h.kind, outer_v6);
  if ((h.destination.family != AF_INET && !outer_v6) || h.source.family != h.destination.family ||
      overhead == 0 || (gue && h.gue_port == 0)) {
    return refused(EncapError::bad_outer);
  }
  if (frame_offset > room.size()) return refused(EncapError::not_whole_packet);
  InnerFacts inner;
  if (EncapError e = check_inner(room.subspan(frame_offset), p, inner); e != EncapError::none) {
    return refused(e);
  }
  if (frame_offset < overhead) return refused(EncapError::no_headroom);
  std::uint32_t outer_header_bytes = outer_v6 ? kIpv6HeaderBytes : kIpv4MinHeaderBytes;
  std::uint32_t inner_bytes = p.l3_bytes;
  std::uint32_t outer_bytes = inner_bytes + overhead;
  if (outer_bytes - (outer_v6 ? kIpv6HeaderBytes : 0) > kMaxLengthField) {
    return refused(EncapError::too_long);
  }

  // The L2 header moves forward (it is at most 22 bytes); the outer headers fill the gap up to
  // the inner packet, which stays where it is.
  std::uint32_t start = frame_offset - overhead;
  std::uint32_t l3 = p.l3_offset;
  std::uint8_t* frame = room.data() + start;
  std::memmove(frame, frame + overhead, l3);
  store_be16(frame + l3 - 2, outer_v6 ? kEthertypeIpv6 : kEthertypeIpv4);
  std::uint8_t* ip = frame + l3;
  std::uint8_t protocol = gue ? std::uint8_t{IPPROTO_UDP}
                              : static_cast<std::uint8_t>(p.is_v4() ? IPPROTO_IPIP : IPPROTO_IPV6);
  std::uint8_t tos = outer_tos(inner.tos);
  if (outer_v6) {
    write_outer_ipv6(ip, outer_bytes - kIpv6HeaderBytes, tos, protocol, h);
  } else {
    write_outer_ipv4(ip, outer_bytes, tos, inner.dont_fragment, protocol, h);
  }
  auto source_port =
      static_cast<std::uint16_t>(kGueSourcePortBase | (h.flow_hash & kGueSourcePortMask));
  if (gue) {
    std::uint8_t* udp = ip + outer_header_bytes;
    store_be16(udp, source_port);
    store_be16(udp + 2, h.gue_port);
    store_be16(udp + 4, static_cast<std::uint16_t>(kUdpHeaderBytes + inner_bytes));
    store_be16(udp + 6, 0);  // IPv4: no checksum (RFC 768); IPv6: finished below
  }

  p.version = outer_v6 ? IpVersion::v6 : IpVersion::v4;
  p.ethertype = outer_v6 ? kEthertypeIpv6 : kEthertypeIpv4;
  p.protocol = protocol;
  p.hop_limit = kEncapTtl;
  store_address(p.src_address, h.source.bytes.data(), !outer_v6);
  store_address(p.dst_address, h.destination.bytes.data(), !outer_v6);
  p.src_port = gue ? source_port : 0;
  p.dst_port = gue ? h.gue_port : 0;
  p.frame_bytes = l3 + outer_bytes;
  p.l3_bytes = outer_bytes;
  p.l4_offset = l3 + outer_header_bytes;
  p.l4_bytes = outer_bytes - outer_header_bytes;
  std::uint32_t l4_header_bytes = gue ? kUdpHeaderBytes : inner.header_bytes;
  p.payload_offset = p.l4_offset + l4_header_bytes;
  p.payload_bytes = p.l4_bytes - l4_header_bytes;
  p.fragment_tail = false;
  Encapsulated out{EncapError::none, start, p.frame_bytes};
  // One pass over the inner packet: IPv6 forbids a zero UDP checksum but for tunnels that agree
  // to it (RFC 6935), and the backend's stack need not.
  if (gue && outer_v6) finish_l4_checksum(out.frame(room), p);
  return out;
}

net::IpAddress ipip_source_in_prefix(const net::Prefix& source_prefix, const net::IpAddress& source,
                                     std::uint32_t flow_hash) noexcept {
  const net::IpAddress& network = source_prefix.address;
  int length = source_prefix.length;
  if (!network.is_v4() || length < 0 || length >= 32) return source;
  std::uint32_t host_mask = 0xffffffffu >> length;
  std::uint32_t host = flow_hash & host_mask;
  // /31: both addresses are hosts (RFC 3021). Shorter: the all-zeros and all-ones host parts are
  // the subnet and its broadcast.
  if (length < 31 && (host == 0 || host == host_mask)) return source;
  net::IpAddress out = network;
  store_be32(out.bytes.data(), (load_be32(network.bytes.data()) & ~host_mask) | host);
  return out;
}

}  // namespace ferry::packet
