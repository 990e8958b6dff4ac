// Internet checksum arithmetic (RFC 1071 sum, RFC 768/793 pseudo-headers).
#include "lib/packet/checksum.hh"

#include <bit>

namespace ferry::packet {

std::uint64_t ones_complement_add(std::uint64_t sum, ConstFrameBytes bytes) noexcept {
  const std::uint8_t* p = bytes.data();
  std::size_t n = bytes.size();
  if (n >= 32) {
    // The bulk in native byte order, 64-bit words split into 32-bit halves (RFC 1071's byte-order
    // independence: the folded sum of byte-swapped words is the byte-swapped folded sum), four
    // words a turn: no byte swap per word. The carries pile up in the high half of the
    // accumulator; a 64 KiB packet cannot overflow it.
    std::uint64_t native = 0;
    for (; n >= 32; p += 32, n -= 32) {
      std::uint64_t a = load_u64(p), b = load_u64(p + 8), c = load_u64(p + 16),
                    d = load_u64(p + 24);
      native += (a & 0xffffffff) + (a >> 32) + (b & 0xffffffff) + (b >> 32);
      native += (c & 0xffffffff) + (c >> 32) + (d & 0xffffffff) + (d >> 32);
    }
    std::uint16_t folded = fold_checksum(native);
    if constexpr (std::endian::native == std::endian::little) {
      folded = static_cast<std::uint16_t>(folded << 8 | folded >> 8);
    }
    sum += folded;
  }
  // The rest as 32-bit big-endian chunks.
  while (n >= 4) {
    sum += load_be32(p);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    sum += load_be16(p);
    p += 2;
    n -= 2;
  }
  if (n == 1) sum += std::uint64_t{p[0]} << 8;
  return sum;
}

std::uint16_t fold_checksum(std::uint64_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(sum);
}

std::uint16_t ipv4_header_checksum(const std::uint8_t* ip, std::uint32_t header_bytes) noexcept {
  std::uint64_t sum = ones_complement_add(0, {ip, 10});
  sum = ones_complement_add(sum, {ip + 12, header_bytes - 12});
  return static_cast<std::uint16_t>(~fold_checksum(sum));
}

namespace {

// The L4 length the pseudo-header carries: UDP's length field, TCP's segment length.
std::uint32_t l4_covered_bytes(const ParsedPacket& p) {
  return p.protocol == IPPROTO_UDP ? p.payload_bytes + kUdpHeaderBytes : p.l4_bytes;
}

std::uint64_t pseudo_header_add(const ParsedPacket& p) {
  std::uint64_t sum = ones_complement_add(0, {p.src_address.data(), p.address_bytes()});
  sum = ones_complement_add(sum, {p.dst_address.data(), p.address_bytes()});
  return sum + p.protocol + l4_covered_bytes(p);
}

}  // namespace

std::uint16_t pseudo_header_sum(const ParsedPacket& p) noexcept {
  return fold_checksum(pseudo_header_add(p));
}

L4Checksum classify_l4_checksum(ConstFrameBytes frame, const ParsedPacket& p) noexcept {
  std::uint16_t field = load_be16(frame.data() + p.l4_checksum_offset());
  if (field == 0 && p.protocol == IPPROTO_UDP) {
    return p.is_v4() ? L4Checksum::none : L4Checksum::ipv6_zero;
  }
  return field == pseudo_header_sum(p) ? L4Checksum::partial : L4Checksum::full;
}

void finish_l4_checksum(FrameBytes frame, const ParsedPacket& p) noexcept {
  store_be16(frame.data() + p.l4_checksum_offset(), l4_checksum(frame, p));
}

std::uint16_t l4_checksum(ConstFrameBytes frame, const ParsedPacket& p) noexcept {
  bool udp = p.protocol == IPPROTO_UDP;
  std::uint32_t covered = l4_covered_bytes(p);
  const std::uint8_t* l4 = frame.data() + p.l4_offset;
  std::uint32_t checksum_at = udp ? 6 : 16;
  std::uint64_t sum = pseudo_header_add(p);
  sum = ones_complement_add(sum, {l4, checksum_at});
  sum = ones_complement_add(sum, {l4 + checksum_at + 2, covered - checksum_at - 2});
  auto checksum = static_cast<std::uint16_t>(~fold_checksum(sum));
  if (udp && checksum == 0) checksum = 0xffff;
  return checksum;
}

}  // namespace ferry::packet
