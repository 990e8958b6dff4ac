// What a handover carries of the AF_XDP fast path from one ferryd to the next: the UMEM's memfd,
// every socket with its rings' sizes, and per worker the slab's free stack and the flow table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "lib/common/unique_fd.hh"
#include "lib/fastpath/flow_table.hh"
#include "lib/handover/offer.hh"
#include "lib/xsk/umem_pool.hh"
#include "lib/xsk/xsk_socket.hh"

namespace ferry::fastpath {

// The kernel objects and their shapes: sent before the old workers stop.
struct HandedOverFastpath {
  xsk::UmemConfig umem;
  bool hugepages = false;
  UniqueFd memfd;
  // [worker][port], in the old plane's order, which the new one's layout must reproduce.
  std::vector<std::vector<xsk::HandedOverSocket>> sockets;
};

// One worker's state at the moment it stopped: every frame of its slab is in a kernel ring or
// on this free stack.
struct WorkerCarry {
  std::uint32_t queue = 0;
  std::vector<std::uint64_t> free_frames;
  FlowTable::Carried flows;
};

// Writes `handed` as the fast path's part of a handover offer: the shapes as fields, the UMEM's
// memfd as fd "umem" and worker W's socket on port P as "xsk:W:P".
void describe(HandedOverFastpath handed, handover::OfferPart& part);
// The inverse, taking the part's fds. Throws std::invalid_argument for a part that does not fit.
HandedOverFastpath handed_over_from(handover::OfferPart& part);

// The workers' carries as bytes, and back (throws std::invalid_argument on a malformed body).
std::vector<std::byte> pack(std::span<const WorkerCarry> carries);
std::vector<WorkerCarry> unpack(std::span<const std::byte> bytes);

}  // namespace ferry::fastpath
