// The frame-conservation invariant of one slab: free stack + fill + rx + in the worker's hands +
// tx + completion == slab size. Computed from the rings' index words, exported as a gauge.
#pragma once

#include <cstdint>
#include <span>

#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/umem_slab.hh"

namespace ferry::xsk {

// Where a slab's frames are. The ring terms are read from the index words this process writes
// plus the producer words the kernel writes on rx and completion, because the kernel publishes
// its fill and tx consumer words lazily; so `fill` counts frames given to the kernel for
// reception and not yet delivered (in the fill ring, or taken by the kernel), and `tx` frames
// submitted for transmission and not yet completed (in the tx ring, or being sent).
struct FrameAccount {
  std::uint64_t slab_frames = 0;
  std::uint64_t free_stack = 0;
  std::uint64_t fill = 0;
  std::uint64_t rx = 0;
  std::uint64_t in_hands = 0;
  std::uint64_t tx = 0;
  std::uint64_t completion = 0;

  std::uint64_t accounted() const { return free_stack + fill + rx + in_hands + tx + completion; }
  bool balanced() const { return accounted() == slab_frames; }
};

// Sums over every (interface, queue) whose rings carry this slab's frames. Exact when called
// between batches: no reservation or peek outstanding on these rings, and `in_hands` is what
// the worker holds outside every ring and the free stack.
FrameAccount account_frames(const UmemSlab& slab, std::span<const QueueRings> queues,
                            std::uint64_t in_hands);

}  // namespace ferry::xsk
