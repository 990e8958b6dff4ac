// What a worker does with one received frame: parse, match a service (balance or reflect) or a
// configured route, find the next hop, rewrite in place. Returns where the frame goes or why it
// is dropped. No allocation, lock, exception, virtual call or std::function.
#pragma once

#include <cstdint>

#include "lib/fastpath/resolution_queue.hh"
#include "lib/fastpath/snapshot.hh"
#include "lib/fastpath/worker_counters.hh"
#include "lib/packet/bytes.hh"
#include "lib/packet/verdict.hh"

namespace ferry::fastpath {

struct FrameOutcome {
  bool forward = false;
  std::uint32_t egress_slot = 0;  // forward: the port slot to transmit on
  Drop drop = Drop::unexpected;   // !forward: why

  static FrameOutcome to(std::uint32_t slot) { return {true, slot, Drop::unexpected}; }
  static FrameOutcome dropped(Drop why) { return {false, 0, why}; }
  bool operator==(const FrameOutcome&) const = default;
};

// Where next-hop misses go: the worker's resolution queue and the counters of what happened to
// the requests.
struct MissSink {
  ResolutionQueue& queue;
  WorkerCounters& counters;
};

// `frame` is rewritten in place when forwarded (and may be partly rewritten when dropped).
// `ingress_slot` is the slot of the port the frame arrived on (reflect sends it back there).
FrameOutcome process_frame(packet::FrameBytes frame, const Snapshot& snapshot,
                           std::uint32_t ingress_slot, MissSink misses) noexcept;

}  // namespace ferry::fastpath
