// QUIC-LB in the fast path: the backend a request of a quic_lb service goes to by the server ID
// its destination connection ID encodes (docs/quic.md), before the flow table and Maglev.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "lib/fastpath/worker_counters.hh"
#include "lib/packet/bytes.hh"
#include "lib/packet/maglev.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/service_table.hh"
#include "lib/quic/quic_lb_service.hh"

namespace ferry::fastpath {

// The backend `q`'s connection ID names, when the service decodes QUIC-LB IDs and that backend may
// take packets (up and not disabled: a drained backend keeps its connections); otherwise
// MaglevTable::kNoBackend and the 4-tuple decides (the draft's baseline fallback: a client's
// Initial, an unroutable or unknown ID, a datagram that is not QUIC). Counted either way. No
// allocation, lock, syscall or exception.
inline std::uint16_t quic_lb_backend(const packet::Service& s, packet::ConstFrameBytes frame,
                                     const packet::ParsedPacket& q, WorkerCounters& c) noexcept {
  if (!s.quic_lb) return packet::MaglevTable::kNoBackend;
  // A first fragment's UDP length covers more than its frame holds: read only what came.
  std::size_t begin = std::min<std::size_t>(q.payload_offset, frame.size());
  std::size_t end =
      std::min<std::size_t>(std::size_t{q.payload_offset} + q.payload_bytes, frame.size());
  quic::QuicLbRoute r = s.quic_lb->route(frame.subspan(begin, end - begin));
  if (r.routed()) {
    if (r.backend < s.backend_up.size() && s.backend_up[r.backend]) {
      c.quic_lb_routed[r.config_id].add();
      return static_cast<std::uint16_t>(r.backend);
    }
    r.outcome = quic::QuicLbOutcome::backend_unusable;
  }
  c.quic_lb_fallback[static_cast<std::size_t>(r.outcome)].add();
  return packet::MaglevTable::kNoBackend;
}

}  // namespace ferry::fastpath
