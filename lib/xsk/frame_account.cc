// The frame-conservation invariant of one slab, from the rings' index words.
#include "lib/xsk/frame_account.hh"

namespace ferry::xsk {

FrameAccount account_frames(const UmemSlab& slab, std::span<const QueueRings> queues,
                            std::uint64_t in_hands) {
  FrameAccount account;
  account.slab_frames = slab.frame_count();
  account.free_stack = slab.free_count();
  account.in_hands = in_hands;
  for (const QueueRings& q : queues) {
    // Unsigned differences of free-running 32-bit indices are right across the 2^32 wrap.
    std::uint32_t rx_produced = q.rx.producer_word();
    std::uint32_t completed = q.completion.producer_word();
    account.fill += static_cast<std::uint32_t>(q.fill.producer_word() - rx_produced);
    account.rx += static_cast<std::uint32_t>(rx_produced - q.rx.consumer_word());
    account.tx += static_cast<std::uint32_t>(q.tx.producer_word() - completed);
    account.completion += static_cast<std::uint32_t>(completed - q.completion.consumer_word());
  }
  return account;
}

}  // namespace ferry::xsk
