// Next-hop MACs as the workers read them: (port, IP) -> MAC, an immutable open-addressing table
// built on the control thread from the kernel's neighbour table. One hash, usually one slot.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "lib/packet/bytes.hh"
#include "lib/packet/flow_hash.hh"
#include "lib/packet/parse.hh"

namespace ferry::fastpath {

struct NeighbourKey {
  std::uint32_t port = 0;  // fast-path slot of the interface the neighbour is on
  packet::IpVersion version = packet::IpVersion::v4;
  std::array<std::uint8_t, 16> address{};  // net::IpAddress::bytes layout
  bool operator==(const NeighbourKey&) const = default;
};

struct Neighbour {
  NeighbourKey key;
  packet::MacAddress mac{};
};

class NeighbourTable {
 public:
  NeighbourTable() = default;
  // Later duplicates of a key are ignored.
  explicit NeighbourTable(std::span<const Neighbour> neighbours);

  const packet::MacAddress* find(std::uint32_t port, packet::IpVersion version,
                                 const std::array<std::uint8_t, 16>& address) const noexcept {
    if (size_ == 0) return nullptr;
    std::uint64_t a0 = packet::load_u64(address.data());
    std::uint64_t a1 = packet::load_u64(address.data() + 8);
    std::uint32_t tag = pack_tag(port, version);
    for (std::size_t i = hash(a0, a1, tag) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (((s.address[0] ^ a0) | (s.address[1] ^ a1) | (s.tag ^ tag)) == 0) return &s.mac;
    }
  }
  std::size_t size() const { return size_; }

 private:
  static std::uint32_t pack_tag(std::uint32_t port, packet::IpVersion version) {
    return (port << 8) | static_cast<std::uint8_t>(version);
  }
  static std::uint64_t hash(std::uint64_t a0, std::uint64_t a1, std::uint32_t tag) {
    using namespace packet::detail;
    return mum(mum(a0 ^ kP0, a1 ^ kP1) ^ tag ^ kP2, kP3);
  }
  struct Slot {
    std::uint64_t address[2] = {0, 0};
    std::uint32_t tag = 0;
    bool used = false;
    packet::MacAddress mac{};
  };
  std::vector<Slot> slots_;  // power of two, at most a quarter full
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace ferry::fastpath
