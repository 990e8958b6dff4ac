// What a worker does with one received frame: parse, match a service (balance or reflect) or a
// configured route, find the next hop, rewrite in place, finish a partial checksum. Returns where
// the frame goes, that it waits for its next hop's MAC, or why it is dropped. No allocation, lock,
// exception, virtual call or std::function.
#pragma once

#include <cstdint>

#include "lib/fastpath/flow_table.hh"
#include "lib/fastpath/resolution_queue.hh"
#include "lib/fastpath/snapshot.hh"
#include "lib/fastpath/worker_counters.hh"
#include "lib/packet/bytes.hh"
#include "lib/packet/verdict.hh"

namespace ferry::fastpath {

enum class Fate : std::uint8_t {
  forward,  // send out of egress_slot
  hold,     // rewritten but for the destination MAC: hold until next_hop resolves, then send
  drop,     // drop, counted as `drop`
};

struct FrameOutcome {
  Fate fate = Fate::drop;
  std::uint32_t egress_slot = 0;  // forward, hold: the port slot to transmit on
  Drop drop = Drop::unexpected;   // drop: why
  NeighbourKey next_hop{};        // hold: whose MAC the frame waits for

  static FrameOutcome to(std::uint32_t slot) { return {Fate::forward, slot, Drop::unexpected, {}}; }
  static FrameOutcome held(std::uint32_t slot, const NeighbourKey& next_hop) {
    return {Fate::hold, slot, Drop::unexpected, next_hop};
  }
  static FrameOutcome dropped(Drop why) { return {Fate::drop, 0, why, {}}; }
  bool operator==(const FrameOutcome&) const = default;
};

// What process_frame reports besides the outcome: next hops to resolve go to the worker's
// resolution queue, and what happened (requests, finished checksums) to its counters.
struct FrameSinks {
  ResolutionQueue& queue;
  WorkerCounters& counters;
};

// The worker's flow affinity table and its batch's clock (FlowTable::clock_ms()). No table:
// every request gets Maglev's choice, as does every request of a service without flow affinity.
struct FlowAffinity {
  FlowTable* table = nullptr;
  std::uint32_t now_ms = 0;
};

// `frame` is rewritten in place when forwarded (and may be partly rewritten when dropped).
// `ingress_slot` is the slot of the port the frame arrived on (reflect sends it back there).
FrameOutcome process_frame(packet::FrameBytes frame, const Snapshot& snapshot,
                           std::uint32_t ingress_slot, FrameSinks sinks,
                           FlowAffinity flows = {}) noexcept;

}  // namespace ferry::fastpath
