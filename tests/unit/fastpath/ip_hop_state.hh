// The worker's IP-hop state for tests that call process_frame() themselves: its fragment table,
// ICMP rate limit, identification counter and the orphans a full fragment bucket gives up.
#pragma once

#include <array>
#include <cstdint>

#include "lib/fastpath/frame_processor.hh"

namespace ferry::fastpath::test {

struct IpHopState {
  FragmentTable fragments;
  packet::IcmpRateLimit icmp_limit;
  std::uint16_t next_ip_id = 0x100;
  std::array<std::uint64_t, FragmentTable::Limits{}.held_frames> orphans{};
  std::uint32_t orphan_count = 0;

  // `room` bytes after the frame and `headroom` before it in its UMEM frame (IpHop).
  IpHop at(std::uint64_t now_ms, std::uint32_t room, std::uint32_t headroom = 0) {
    return {&fragments, &icmp_limit, &next_ip_id, now_ms, room, orphans, &orphan_count, headroom};
  }
};

}  // namespace ferry::fastpath::test
