// Server ID -> backend index for one QUIC-LB service: a flat open-addressing table built at config
// load, looked up per packet without allocation (two 8-byte compares per probe).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "lib/quic/lb_config.hh"

namespace ferry::quic {

struct ServerIdEntry {
  std::array<std::uint8_t, kMaxServerIdBytes> bytes{};
  std::uint8_t length = 0;  // 1..15
  std::uint32_t backend = 0;

  // Throws std::invalid_argument for an empty or longer than 15 octets ID.
  static ServerIdEntry make(std::span<const std::uint8_t> id, std::uint32_t backend);
};

class ServerIdMap {
 public:
  static constexpr std::uint32_t kNotFound = UINT32_MAX;

  ServerIdMap() = default;
  // Throws std::invalid_argument when an ID appears twice.
  explicit ServerIdMap(std::span<const ServerIdEntry> entries);

  std::uint32_t find(const std::uint8_t* id, std::size_t length) const noexcept;
  std::size_t size() const { return size_; }

 private:
  // The key is the length octet, then the ID, zero padded: IDs of different lengths never meet.
  struct Slot {
    std::uint64_t key_low = 0;  // 0 in both words: empty (a length is never 0)
    std::uint64_t key_high = 0;
    std::uint32_t backend = kNotFound;
  };
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace ferry::quic
