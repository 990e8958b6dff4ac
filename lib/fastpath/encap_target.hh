// Where an encapsulated packet goes: the tunnel, the backend and the flow's hash that picks the
// outer source or port. Whole packets name it from their service's chosen backend; the later
// fragments of a datagram keep their first fragment's (FragmentDecision).
#pragma once

#include <cstdint>

#include "lib/common/net.hh"
#include "lib/packet/encap.hh"

namespace ferry::fastpath {

struct EncapTarget {
  packet::EncapKind kind = packet::EncapKind::ipip;
  net::IpAddress backend;
  std::uint32_t flow_hash = 0;  // the datagram's, so its fragments share the outer header
  std::uint32_t counter_slot =
      ~0u;  // the backend's per-backend counter slot (packet::kNoCounterSlot)
};

}  // namespace ferry::fastpath
