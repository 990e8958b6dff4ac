// Frame recycling between rings and the slab.
#include "lib/xsk/recycle.hh"

namespace ferry::xsk {

RecycleResult recycle_completions(CompletionRing& completion, FillRing& fill, UmemSlab& slab,
                                  std::uint32_t max_frames) {
  RecycleResult result;
  RingSlices<const std::uint64_t> done = completion.peek(max_frames);
  if (done.empty()) return result;
  RingSlices<std::uint64_t> slots = fill.reserve(done.size());
  copy_between(done.first(slots.size()), slots);
  fill.submit(slots.size());
  result.to_fill = slots.size();
  if (slots.size() < done.size()) {
    RingSlices<const std::uint64_t> surplus = done.drop(slots.size());
    SlabFreeResult head = slab.free(surplus.head);
    SlabFreeResult tail = slab.free(surplus.tail);
    result.to_slab = head.freed + tail.freed;
    result.rejected = head.outside_slab + head.double_free + tail.outside_slab + tail.double_free;
  }
  completion.release(done.size());
  return result;
}

std::uint32_t refill(FillRing& fill, UmemSlab& slab, std::uint32_t max_frames) {
  if (slab.free_count() < max_frames) max_frames = slab.free_count();
  RingSlices<std::uint64_t> slots = fill.reserve(max_frames);
  if (slots.empty()) return 0;
  // Both allocations succeed in full: the reservation was capped at the free count.
  std::uint32_t n = slab.alloc(slots.head);
  n += slab.alloc(slots.tail);
  fill.submit(n);
  return n;
}

}  // namespace ferry::xsk
