// Address/port rewrites and TTL decrement with incremental checksum updates.
#include "lib/packet/rewrite.hh"

#include <cstring>

#include "lib/packet/checksum.hh"

namespace ferry::packet {

void rewrite_endpoint(FrameBytes frame, ParsedPacket& p, Side side,
                      const std::array<std::uint8_t, 16>& address, std::uint16_t port) noexcept {
  std::uint8_t* f = frame.data();
  bool source = side == Side::source;
  std::uint32_t address_at = source ? p.src_address_offset() : p.dst_address_offset();
  std::uint32_t port_at = p.l4_offset + (source ? 0 : 2);
  std::uint32_t n = p.address_bytes();

  ChecksumDelta address_delta;
  address_delta.replace(f + address_at, address.data(), n);
  ChecksumDelta l4_delta = address_delta;  // the pseudo-header carries the addresses too
  l4_delta.replace16(load_be16(f + port_at), port);

  if (p.is_v4()) {
    std::uint8_t* ip_checksum = f + p.l3_offset + 10;
    store_be16(ip_checksum, address_delta.apply(load_be16(ip_checksum)));
  }
  std::uint8_t* l4_checksum_at = f + p.l4_checksum_offset();
  std::uint16_t l4_checksum = load_be16(l4_checksum_at);
  bool udp = p.protocol == IPPROTO_UDP;
  // UDP checksum 0 means the sender sent none (legal on IPv4; on IPv6 only for tunnels, RFC 6935):
  // keep it so, rather than inventing a checksum over bytes nobody summed.
  if (!(udp && l4_checksum == 0)) {
    l4_checksum = l4_delta.apply(l4_checksum);
    if (udp && l4_checksum == 0) l4_checksum = 0xffff;
    store_be16(l4_checksum_at, l4_checksum);
  }

  std::memcpy(f + address_at, address.data(), n);
  store_be16(f + port_at, port);
  store_address(source ? p.src_address : p.dst_address, address.data(), p.is_v4());
  (source ? p.src_port : p.dst_port) = port;
}

void rewrite_address(FrameBytes frame, ParsedPacket& p, Side side,
                     const std::array<std::uint8_t, 16>& address) noexcept {
  std::uint8_t* f = frame.data();
  bool source = side == Side::source;
  std::uint32_t address_at = source ? p.src_address_offset() : p.dst_address_offset();
  if (p.is_v4()) {
    ChecksumDelta delta;
    delta.replace(f + address_at, address.data(), 4);
    std::uint8_t* ip_checksum = f + p.l3_offset + 10;
    store_be16(ip_checksum, delta.apply(load_be16(ip_checksum)));
  }
  std::memcpy(f + address_at, address.data(), p.address_bytes());
  store_address(source ? p.src_address : p.dst_address, address.data(), p.is_v4());
}

void decrement_hop_limit(FrameBytes frame, ParsedPacket& p) noexcept {
  std::uint8_t* ip = frame.data() + p.l3_offset;
  if (p.is_v4()) {
    // TTL is the high byte of the 16-bit word it shares with the protocol.
    ChecksumDelta delta;
    delta.replace16(static_cast<std::uint16_t>(ip[8] << 8 | ip[9]),
                    static_cast<std::uint16_t>((ip[8] - 1) << 8 | ip[9]));
    store_be16(ip + 10, delta.apply(load_be16(ip + 10)));
    ip[8] = static_cast<std::uint8_t>(ip[8] - 1);
  } else {
    ip[7] = static_cast<std::uint8_t>(ip[7] - 1);
  }
  p.hop_limit = static_cast<std::uint8_t>(p.hop_limit - 1);
}

}  // namespace ferry::packet
