// Big-endian loads and stores at byte offsets of a frame, and the MAC address type. Callers check
// bounds first (the parser does, once per header); these only avoid unaligned-access UB.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace ferry::packet {

using MacAddress = std::array<std::uint8_t, 6>;

// A received frame as the packet layer sees it: bytes the actions may rewrite in place.
using FrameBytes = std::span<std::uint8_t>;
using ConstFrameBytes = std::span<const std::uint8_t>;

// UMEM frames are std::byte; the packet layer does arithmetic on octets.
inline FrameBytes frame_bytes(std::byte* data, std::size_t len) {
  return {reinterpret_cast<std::uint8_t*>(data), len};
}

inline std::uint16_t load_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}
inline void store_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void store_be32(std::uint8_t* p, std::uint32_t v) {
  store_be16(p, static_cast<std::uint16_t>(v >> 16));
  store_be16(p + 2, static_cast<std::uint16_t>(v));
}

// Native-endian 64-bit load for hashing; memcpy is the defined way to read unaligned words.
inline std::uint64_t load_u64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store_u64(std::uint8_t* p, std::uint64_t v) {
  std::memcpy(p, &v, sizeof v);
}

// Copies an IPv4 (4 bytes, rest zeroed) or IPv6 address into the net::IpAddress::bytes layout as
// two 8-byte stores, so that the 8-byte loads of the hash and the lookups forward from them.
inline void store_address(std::array<std::uint8_t, 16>& to, const std::uint8_t* from, bool v4) {
  if (v4) {
    std::uint8_t low[8] = {};
    std::memcpy(low, from, 4);
    store_u64(to.data(), load_u64(low));
    store_u64(to.data() + 8, 0);
  } else {
    store_u64(to.data(), load_u64(from));
    store_u64(to.data() + 8, load_u64(from + 8));
  }
}

}  // namespace ferry::packet
