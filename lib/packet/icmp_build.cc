// build_icmp_error(): the gateway's own ICMP and ICMPv6 errors (time exceeded, fragmentation
// needed / packet too big, unreachable), written in place over the packet they are about.
#include <algorithm>
#include <cstring>

#include "lib/packet/checksum.hh"
#include "lib/packet/icmp.hh"

namespace ferry::packet {
namespace {

constexpr std::uint8_t kErrorHopLimit = 64;
constexpr std::uint8_t kErrorTos = 0xc0;  // precedence "internetwork control", as icmp_send()

void write_ipv4_header(std::uint8_t* ip, std::uint32_t total_bytes, std::uint16_t ip_id,
                       const std::uint8_t* source, const std::uint8_t* destination) {
  ip[0] = 0x45;
  ip[1] = kErrorTos;
  store_be16(ip + 2, static_cast<std::uint16_t>(total_bytes));
  store_be16(ip + 4, ip_id);
  store_be16(ip + 6, 0);  // DF clear: an error may be fragmented on its way (RFC 1812 4.3.2.3)
  ip[8] = kErrorHopLimit;
  ip[9] = IPPROTO_ICMP;
  std::memcpy(ip + 12, source, 4);
  std::memcpy(ip + 16, destination, 4);
  store_be16(ip + 10, ipv4_header_checksum(ip, kIpv4MinHeaderBytes));
}

void write_ipv6_header(std::uint8_t* ip, std::uint32_t payload_bytes, const std::uint8_t* source,
                       const std::uint8_t* destination) {
  store_be32(ip, 0x60000000);  // traffic class 0, flow label 0
  store_be16(ip + 4, static_cast<std::uint16_t>(payload_bytes));
  ip[6] = IPPROTO_ICMPV6;
  ip[7] = kErrorHopLimit;
  std::memcpy(ip + 8, source, 16);
  std::memcpy(ip + 24, destination, 16);
}

// The ICMP header's second word: the next link's MTU where the error carries one, else zero
// (RFC 792 "unused", RFC 4443 "unused").
void write_icmp_header(std::uint8_t* icmp, bool v4, const IcmpReason& reason) {
  icmp[0] = reason.type;
  icmp[1] = reason.code;
  std::memset(icmp + 2, 0, kIcmpHeaderBytes - 2);  // the checksum, summed over zero first
  if (v4 && reason.type == kIcmpDestinationUnreachable && reason.code == kIcmpFragmentationNeeded) {
    // RFC 1191 4: the next-hop MTU in the low-order 16 bits.
    store_be16(icmp + 6, static_cast<std::uint16_t>(std::min<std::uint32_t>(reason.mtu, 0xffff)));
  } else if (!v4 && reason.type == kIcmp6PacketTooBig) {
    store_be32(icmp + 4, reason.mtu);
  }
}

std::uint16_t icmp_checksum(const std::uint8_t* icmp, std::uint32_t icmp_bytes, bool v4,
                            const std::uint8_t* source, const std::uint8_t* destination) {
  std::uint64_t sum = 0;
  if (!v4) {  // RFC 4443 2.3: the RFC 8200 8.1 pseudo-header
    sum = ones_complement_add(sum, {source, 16});
    sum = ones_complement_add(sum, {destination, 16});
    sum += icmp_bytes + IPPROTO_ICMPV6;
  }
  sum = ones_complement_add(sum, {icmp, icmp_bytes});
  return static_cast<std::uint16_t>(~fold_checksum(sum));
}

}  // namespace

std::uint32_t build_icmp_error(FrameBytes frame, ParsedPacket& p, const IcmpReason& reason,
                               const std::array<std::uint8_t, 16>& source,
                               std::uint16_t ip_id) noexcept {
  bool v4 = p.is_v4();
  std::uint32_t ip_header_bytes = v4 ? kIpv4MinHeaderBytes : kIpv6HeaderBytes;
  std::uint32_t max_ip_bytes = v4 ? kIcmpErrorMaxIpBytes4 : kIcmpErrorMaxIpBytes6;
  std::uint32_t l3 = p.l3_offset;
  // Whatever filled p, the quote is read from inside the frame only.
  if (p.l3_bytes == 0 || frame.size() < l3 + std::uint64_t{p.l3_bytes} ||
      p.l4_offset < l3 + ip_header_bytes || p.l4_offset > l3 + p.l3_bytes) {
    return 0;
  }
  // The smallest useful error quotes the IP header(s) and 8 bytes more: the UDP header.
  std::uint32_t least_quote = std::min(p.l3_bytes, p.l4_offset - l3 + kUdpHeaderBytes);
  std::uint64_t head = std::uint64_t{l3} + ip_header_bytes + kIcmpHeaderBytes;
  if (frame.size() < head + least_quote) return 0;
  auto quote = static_cast<std::uint32_t>(std::min<std::uint64_t>(
      {p.l3_bytes, max_ip_bytes - ip_header_bytes - kIcmpHeaderBytes, frame.size() - head}));

  std::uint8_t* ip = frame.data() + l3;
  std::uint8_t* icmp = ip + ip_header_bytes;
  std::memmove(icmp + kIcmpHeaderBytes, ip, quote);
  const std::array<std::uint8_t, 16> destination = p.src_address;  // the packet's sender
  std::uint32_t icmp_bytes = kIcmpHeaderBytes + quote;
  if (v4) {
    write_ipv4_header(ip, ip_header_bytes + icmp_bytes, ip_id, source.data(), destination.data());
  } else {
    write_ipv6_header(ip, icmp_bytes, source.data(), destination.data());
  }
  write_icmp_header(icmp, v4, reason);
  store_be16(icmp + 2, icmp_checksum(icmp, icmp_bytes, v4, source.data(), destination.data()));

  p.protocol = static_cast<std::uint8_t>(v4 ? int{IPPROTO_ICMP} : int{IPPROTO_ICMPV6});
  p.hop_limit = kErrorHopLimit;
  store_address(p.src_address, source.data(), v4);
  p.dst_address = destination;
  p.src_port = p.dst_port = 0;
  p.l3_bytes = ip_header_bytes + icmp_bytes;
  p.l4_offset = l3 + ip_header_bytes;
  p.l4_bytes = icmp_bytes;
  p.payload_offset = p.l4_offset + kIcmpHeaderBytes;
  p.payload_bytes = quote;
  p.fragment_tail = false;
  p.frame_bytes = l3 + p.l3_bytes;
  return p.frame_bytes;
}

}  // namespace ferry::packet
