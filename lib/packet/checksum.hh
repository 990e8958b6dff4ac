// Internet checksums: the RFC 1071 ones'-complement sum, full IPv4 header and UDP/TCP checksums
// (for verification and tests), and the RFC 1624 incremental update the actions use per packet.
#pragma once

#include <cstdint>

#include "lib/packet/bytes.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

// Adds `bytes` to `sum` as big-endian 16-bit words, an odd last byte padded with a zero byte
// (RFC 1071). The result is unfolded: keep adding, fold once at the end.
std::uint64_t ones_complement_add(std::uint64_t sum, ConstFrameBytes bytes) noexcept;
// Folds the carries back in (end-around carry) until 16 bits remain.
std::uint16_t fold_checksum(std::uint64_t sum) noexcept;

// The checksum a sender would write in the IPv4 header at `ip` (the checksum field is skipped).
std::uint16_t ipv4_header_checksum(const std::uint8_t* ip, std::uint32_t header_bytes) noexcept;
// The UDP or TCP checksum a sender would write for the parsed packet: pseudo-header (addresses,
// protocol, L4 length) plus the L4 bytes, checksum field skipped. UDP covers the UDP length field's
// bytes; a computed 0 is returned as 0xffff, since 0 on the wire means "no checksum" (RFC 768).
std::uint16_t l4_checksum(ConstFrameBytes frame, const ParsedPacket& p) noexcept;

// What a frame's UDP/TCP checksum field holds on arrival, decided before any rewrite.
enum class L4Checksum : std::uint8_t {
  // A complete checksum, right or wrong: the incremental update keeps it exactly as right (or as
  // wrong) as it came, as a router or a NAT does.
  full,
  // The folded pseudo-header sum, not complemented: what a sender with transmit checksum offload
  // leaves for the NIC to finish (CHECKSUM_PARTIAL). veth and AF_XDP copy mode hand it over as
  // is, so the frame needs its checksum computed after the rewrite. A corrupt full checksum that
  // happens to equal the signature (1 in 65,536) is finished too: the documented exception.
  partial,
  // UDP over IPv4 with 0: the sender sent no checksum (RFC 768); it stays 0.
  none,
  // UDP over IPv6 with 0, which IPv6 forbids but for tunnels (RFC 6935): computed, so ferry never
  // sends 0 out on IPv6.
  ipv6_zero,
};

// The folded, not complemented, pseudo-header sum of the parsed packet (addresses, protocol, L4
// length): what a CHECKSUM_PARTIAL sender writes into the checksum field.
std::uint16_t pseudo_header_sum(const ParsedPacket& p) noexcept;
// Classifies the checksum field of a parsed UDP or TCP packet (see L4Checksum).
L4Checksum classify_l4_checksum(ConstFrameBytes frame, const ParsedPacket& p) noexcept;
// Writes the full UDP/TCP checksum for the packet as it is now (p in step with the frame): one
// pass over the L4 bytes. For partial and ipv6_zero frames, after the rewrite.
void finish_l4_checksum(FrameBytes frame, const ParsedPacket& p) noexcept;
// True when the class needs finish_l4_checksum() once the frame is rewritten.
inline bool needs_finishing(L4Checksum c) {
  return c == L4Checksum::partial || c == L4Checksum::ipv6_zero;
}

// RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), accumulated over any number of replaced 16-bit words
// and applied to every checksum that covers them. Gives the same value as a full recomputation
// (including 0x0000 rather than 0xffff), which the tests check over random rewrites.
class ChecksumDelta {
 public:
  void replace16(std::uint16_t old_word, std::uint16_t new_word) {
    sum_ += static_cast<std::uint16_t>(~old_word);
    sum_ += new_word;
  }
  // Replaces `count` bytes (even) at old_bytes with those at new_bytes.
  void replace(const std::uint8_t* old_bytes, const std::uint8_t* new_bytes, std::uint32_t count) {
    for (std::uint32_t i = 0; i + 1 < count; i += 2) {
      replace16(load_be16(old_bytes + i), load_be16(new_bytes + i));
    }
  }
  std::uint16_t apply(std::uint16_t checksum) const {
    return static_cast<std::uint16_t>(
        ~fold_checksum(std::uint64_t{static_cast<std::uint16_t>(~checksum)} + sum_));
  }
  bool empty() const { return sum_ == 0; }

 private:
  std::uint64_t sum_ = 0;
};

}  // namespace ferry::packet
