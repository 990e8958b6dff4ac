// Frame recycling between rings and the slab: completed tx frames go straight back to the fill
// ring in one batch; only what the fill ring cannot take spills into the slab's free stack.
#pragma once

#include <cstdint>

#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/umem_slab.hh"

namespace ferry::xsk {

struct RecycleResult {
  std::uint32_t to_fill = 0;   // moved ring to ring
  std::uint32_t to_slab = 0;   // spilled into the free stack
  std::uint32_t rejected = 0;  // not this slab's frames, or already free: a bug, counted
};

// Harvests up to `max_frames` completions. No allocation, no per-entry loop on the ring-to-ring
// part (at most three memcpy calls); the spill goes through UmemSlab::free, which checks each
// frame.
RecycleResult recycle_completions(CompletionRing& completion, FillRing& fill, UmemSlab& slab,
                                  std::uint32_t max_frames = 64);

// Moves up to `max_frames` frames from the slab's free stack into the fill ring, popping them
// directly into the ring slots. Returns how many were moved.
std::uint32_t refill(FillRing& fill, UmemSlab& slab, std::uint32_t max_frames);

}  // namespace ferry::xsk
