// A fast seeded non-cryptographic hash of a flow's 5-tuple (and of arbitrary keys), the same on
// every worker for the same seed, so any worker picks the same backend for a flow.
#pragma once

#include <cstdint>
#include <span>

#include "lib/packet/bytes.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

inline constexpr std::uint64_t kDefaultFlowHashSeed = 0x6665727279u;  // "ferry"

namespace detail {
// The wyhash "mum" step: a 64x64->128 multiply folded to 64 bits. One multiply per 16 bytes of
// input and a full avalanche, which is what Maglev's evenness needs from the flow hash.
inline std::uint64_t mum(std::uint64_t a, std::uint64_t b) {
  __extension__ using u128 = unsigned __int128;
  u128 r = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}
inline constexpr std::uint64_t kP0 = 0xa0761d6478bd642full;
inline constexpr std::uint64_t kP1 = 0xe7037ed1a0b428dbull;
inline constexpr std::uint64_t kP2 = 0x8ebc6af09c88c6e3ull;
inline constexpr std::uint64_t kP3 = 0x589965cc75374cc3ull;
}  // namespace detail

// Hash of (src address, dst address, src port, dst port, protocol, IP version). Direction
// matters: client->VIP and the reply hash differently, which balance never needs to match.
inline std::uint64_t flow_hash(const ParsedPacket& p, std::uint64_t seed) {
  using namespace detail;
  std::uint64_t tail = (std::uint64_t{p.src_port} << 32) | (std::uint64_t{p.dst_port} << 16) |
                       (std::uint64_t{p.protocol} << 8) | static_cast<std::uint8_t>(p.version);
  std::uint64_t h =
      mum(load_u64(p.src_address.data()) ^ seed ^ kP0, load_u64(p.src_address.data() + 8) ^ kP1);
  h = mum(load_u64(p.dst_address.data()) ^ h ^ kP2, load_u64(p.dst_address.data() + 8) ^ kP3);
  return mum(h ^ tail ^ kP1, kP0 ^ seed);
}

// Hash of any byte string (backend keys for Maglev, service keys for the lookup tables).
inline std::uint64_t hash_bytes(std::span<const std::uint8_t> bytes, std::uint64_t seed) {
  using namespace detail;
  std::uint64_t h = seed ^ kP0 ^ (bytes.size() * kP3);
  std::size_t i = 0;
  for (; i + 16 <= bytes.size(); i += 16) {
    h = mum(load_u64(bytes.data() + i) ^ h ^ kP1, load_u64(bytes.data() + i + 8) ^ kP2);
  }
  std::uint64_t a = 0, b = 0;
  for (std::size_t j = 0; i + j < bytes.size(); ++j) {
    std::uint64_t byte = bytes[i + j];
    if (j < 8)
      a |= byte << (8 * j);
    else
      b |= byte << (8 * (j - 8));
  }
  return mum(mum(a ^ h ^ kP1, b ^ kP2) ^ kP3, kP0 ^ seed);
}

}  // namespace ferry::packet
