// Holding frames for unresolved next hops.
#include "lib/fastpath/hold_queue.hh"

namespace ferry::fastpath {

bool HoldQueue::hold(const NeighbourKey& next_hop, std::uint32_t egress_slot, std::uint64_t addr,
                     std::uint32_t len) noexcept {
  if (frame_count_ >= max_frames_) return false;
  // A linear scan over at most kMaxHops keys, only for frames that missed their next hop.
  std::uint32_t free_slot = kMaxHops;
  std::uint32_t h = 0;
  for (; h < kMaxHops; ++h) {
    if (hops_[h].frames == 0) {
      if (free_slot == kMaxHops) free_slot = h;
    } else if (hops_[h].key == next_hop) {
      break;
    }
  }
  if (h == kMaxHops) {
    if (free_slot == kMaxHops) return false;
    h = free_slot;
    hops_[h] = Hop{next_hop, 0, 0, {}};
  }
  Hop& hop = hops_[h];
  if (hop.bytes + len > kMaxBytesPerHop) return false;
  ++hop.frames;
  hop.bytes += len;
  frames_[frame_count_++] = Frame{addr, len, egress_slot, h};
  return true;
}

std::uint32_t HoldQueue::hops_waiting() const {
  std::uint32_t n = 0;
  for (const Hop& hop : hops_) n += hop.frames != 0;
  return n;
}

}  // namespace ferry::fastpath
