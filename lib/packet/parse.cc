// Parses one Ethernet frame into a ParsedPacket. Every read is preceded by a length check against
// what is left of the frame (or of the IP packet, once its length field is known).
#include "lib/packet/parse.hh"

#include <algorithm>

namespace ferry::packet {
namespace {

constexpr std::string_view kParseErrorNames[kParseErrorCount] = {
    "none",
    "truncated_ethernet",
    "truncated_vlan",
    "too_many_vlans",
    "unsupported_ethertype",
    "truncated_ipv4",
    "bad_ip_version",
    "bad_ihl",
    "bad_ipv4_length",
    "ipv4_fragment",
    "truncated_ipv6",
    "bad_ipv6_length",
    "ipv6_extension_header",
    "unsupported_protocol",
    "truncated_udp",
    "bad_udp_length",
    "truncated_tcp",
    "bad_tcp_offset",
};

// IPv6 next-header values that are extension headers (RFC 8200 4, IANA "IPv6 Extension Header
// Types"), plus 59 "no next header". All of them go to the kernel rather than being walked here.
bool is_ipv6_extension_header(std::uint8_t next) {
  switch (next) {
    case 0:    // hop-by-hop options
    case 43:   // routing
    case 44:   // fragment
    case 50:   // ESP
    case 51:   // AH
    case 59:   // no next header
    case 60:   // destination options
    case 135:  // mobility
    case 139:  // HIP
    case 140:  // shim6
    case 253:  // experimental
    case 254:
      return true;
    default:
      return false;
  }
}

// The transport header at out.l4_offset, within the out.l4_bytes the IP length field gives it.
ParseError parse_l4(const std::uint8_t* frame, ParsedPacket& out) {
  const std::uint8_t* l4 = frame + out.l4_offset;
  if (out.protocol == IPPROTO_UDP) {
    if (out.l4_bytes < kUdpHeaderBytes) return ParseError::truncated_udp;
    std::uint16_t udp_length = load_be16(l4 + 4);
    // Shorter than the IP payload is legal (the rest is padding, as Linux trims it); longer is not.
    if (udp_length < kUdpHeaderBytes || udp_length > out.l4_bytes)
      return ParseError::bad_udp_length;
    out.payload_offset = out.l4_offset + kUdpHeaderBytes;
    out.payload_bytes = udp_length - kUdpHeaderBytes;
  } else {
    if (out.l4_bytes < kTcpMinHeaderBytes) return ParseError::truncated_tcp;
    std::uint32_t header_bytes = (l4[12] >> 4) * 4u;
    if (header_bytes < kTcpMinHeaderBytes || header_bytes > out.l4_bytes) {
      return ParseError::bad_tcp_offset;
    }
    out.payload_offset = out.l4_offset + header_bytes;
    out.payload_bytes = out.l4_bytes - header_bytes;
  }
  out.src_port = load_be16(l4);
  out.dst_port = load_be16(l4 + 2);
  return ParseError::none;
}

ParseError parse_ipv4(const std::uint8_t* frame, std::uint32_t frame_len, ParsedPacket& out) {
  std::uint32_t available = frame_len - out.l3_offset;
  if (available < kIpv4MinHeaderBytes) return ParseError::truncated_ipv4;
  const std::uint8_t* ip = frame + out.l3_offset;
  if ((ip[0] >> 4) != 4) return ParseError::bad_ip_version;
  std::uint32_t header_bytes = (ip[0] & 0x0f) * 4u;
  if (header_bytes < kIpv4MinHeaderBytes) return ParseError::bad_ihl;
  if (header_bytes > available) return ParseError::truncated_ipv4;
  std::uint32_t total_length = load_be16(ip + 2);
  // Frames may be longer than the packet (Ethernet pads to 60 bytes); never shorter.
  if (total_length < header_bytes || total_length > available) return ParseError::bad_ipv4_length;
  out.version = IpVersion::v4;
  out.hop_limit = ip[8];
  out.protocol = ip[9];
  out.l3_bytes = total_length;
  out.l4_offset = out.l3_offset + header_bytes;
  out.l4_bytes = total_length - header_bytes;
  store_address(out.src_address, ip + 12, true);
  store_address(out.dst_address, ip + 16, true);
  out.fragment_tail = false;
  std::uint16_t flags_offset = load_be16(ip + 6);
  if ((flags_offset & 0x3fff) != 0) return ParseError::ipv4_fragment;  // MF or offset != 0
  if (out.protocol != IPPROTO_UDP && out.protocol != IPPROTO_TCP) {
    return ParseError::unsupported_protocol;
  }
  return parse_l4(frame, out);
}

ParseError parse_ipv6(const std::uint8_t* frame, std::uint32_t frame_len, ParsedPacket& out) {
  std::uint32_t available = frame_len - out.l3_offset;
  if (available < kIpv6HeaderBytes) return ParseError::truncated_ipv6;
  const std::uint8_t* ip = frame + out.l3_offset;
  if ((ip[0] >> 4) != 6) return ParseError::bad_ip_version;
  std::uint32_t payload_length = load_be16(ip + 4);
  if (payload_length > available - kIpv6HeaderBytes) return ParseError::bad_ipv6_length;
  out.version = IpVersion::v6;
  out.protocol = ip[6];
  out.hop_limit = ip[7];
  out.l3_bytes = kIpv6HeaderBytes + payload_length;
  out.l4_offset = out.l3_offset + kIpv6HeaderBytes;
  out.l4_bytes = payload_length;
  store_address(out.src_address, ip + 8, false);
  store_address(out.dst_address, ip + 24, false);
  out.fragment_tail = false;
  if (is_ipv6_extension_header(out.protocol)) return ParseError::ipv6_extension_header;
  if (out.protocol != IPPROTO_UDP && out.protocol != IPPROTO_TCP) {
    return ParseError::unsupported_protocol;
  }
  return parse_l4(frame, out);
}

}  // namespace

std::string_view to_string(ParseError e) {
  auto i = static_cast<std::size_t>(e);
  return i < kParseErrorCount ? kParseErrorNames[i] : std::string_view{"unknown"};
}

bool passes_to_kernel(ParseError e) {
  switch (e) {
    case ParseError::unsupported_ethertype:
    case ParseError::ipv4_fragment:
    case ParseError::ipv6_extension_header:
    case ParseError::unsupported_protocol:
      return true;
    default:
      return false;
  }
}

ParseError parse_frame(ConstFrameBytes frame, ParsedPacket& out) noexcept {
  const std::uint8_t* bytes = frame.data();
  // Offsets are 32-bit. No UMEM frame comes near that; clamping keeps a bogus span harmless.
  auto frame_len = static_cast<std::uint32_t>(std::min<std::size_t>(frame.size(), UINT32_MAX));
  out.frame_bytes = frame_len;
  if (frame_len < kEthernetHeaderBytes) return ParseError::truncated_ethernet;
  std::uint32_t offset = 12;  // the ethertype or TPID after both MAC addresses
  std::uint16_t ethertype = load_be16(bytes + offset);
  out.vlan_count = 0;
  out.vlan_ids = {};
  while (ethertype == kEthertypeVlan || ethertype == kEthertypeQinQ) {
    if (out.vlan_count == kMaxVlanTags) return ParseError::too_many_vlans;
    // The tag is TCI (2 bytes) then the next ethertype (2 bytes).
    if (frame_len - (offset + 2) < kVlanTagBytes) return ParseError::truncated_vlan;
    out.vlan_ids[out.vlan_count++] = load_be16(bytes + offset + 2) & 0x0fff;
    offset += kVlanTagBytes;
    ethertype = load_be16(bytes + offset);
  }
  out.ethertype = ethertype;
  out.l3_offset = offset + 2;
  if (ethertype == kEthertypeIpv4) return parse_ipv4(bytes, frame_len, out);
  if (ethertype == kEthertypeIpv6) return parse_ipv6(bytes, frame_len, out);
  return ParseError::unsupported_ethertype;
}

}  // namespace ferry::packet
