// The decap program's per-CPU counters, summed, and the names status gives their slots.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "bpf/ferry_decap_shared.h"

namespace ferry::decap {

struct PacketBytes {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
};

using DecapCounters = std::array<PacketBytes, bpf::FERRY_DECAP_COUNTER_COUNT>;

// Sums every slot over the possible CPUs. Throws std::runtime_error.
DecapCounters read_counters(int counters_fd);

// "ipip4_in_4", ..., "passed", "outer_truncated", ...: the JSON key and the status row of a slot.
std::string_view slot_name(std::uint32_t slot);

inline bool is_stripped(std::uint32_t slot) {
  return slot < bpf::FERRY_DECAP_PASSED;
}
inline bool is_refused(std::uint32_t slot) {
  return slot >= bpf::FERRY_DECAP_REFUSED_FIRST;
}

}  // namespace ferry::decap
