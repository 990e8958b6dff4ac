// The balance action: stateless UDP DNAT. Client -> VIP:port goes to the backend Maglev picks for
// the flow; backend -> client replies get VIP:port back as their source. No per-flow state, so
// any worker can take either direction, and a backend leaving moves only its own flows.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "lib/packet/bytes.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/route.hh"
#include "lib/packet/service_table.hh"
#include "lib/packet/verdict.hh"

namespace ferry::packet {

enum class BalanceStep : std::uint8_t {
  to_backend,    // destination rewritten to the chosen backend
  to_client,     // source rewritten back to the VIP
  no_backend,    // a service of ours, but none of its backends is up; frame untouched
  ttl_expired,   // would be forwarded but TTL / hop limit <= 1; frame untouched
  not_balanced,  // no balance service matches (or a reflect one does); frame untouched
  malformed,     // `frame` does not hold what `p` describes; frame untouched
};
std::string_view to_string(BalanceStep s);

// The L3/L4 half: rewrites the destination (request) or source (reply) address and port, with
// the IPv4 header and UDP/TCP checksums updated incrementally (UDP checksum 0 stays 0).
BalanceStep balance_rewrite(FrameBytes frame, ParsedPacket& p, const ServiceTable& table) noexcept;

// The backend balance_rewrite would choose for a request, or MaglevTable::kNoBackend. Pure.
std::uint16_t choose_backend(const Service& service, const ParsedPacket& p,
                             std::uint64_t flow_hash_seed) noexcept;

// The whole action: balance_rewrite, then the route step (hop limit, checksum, MACs) towards the
// rewritten destination, whose next hop the caller's `resolve` finds (see route_via()).
// Not a balanced flow -> pass_to_kernel verdict (the worker tries its other actions first).
template <typename ResolveNextHop>
Verdict balance(FrameBytes frame, ParsedPacket& p, const ServiceTable& table,
                ResolveNextHop&& resolve) noexcept {
  switch (balance_rewrite(frame, p, table)) {
    case BalanceStep::to_backend:
    case BalanceStep::to_client:
      return route_via(frame, p, std::forward<ResolveNextHop>(resolve));
    case BalanceStep::no_backend:
      return Verdict::drop(DropReason::no_backend);
    case BalanceStep::ttl_expired:
      return Verdict::drop(DropReason::ttl_expired);
    case BalanceStep::malformed:
      return Verdict::drop(DropReason::malformed);
    case BalanceStep::not_balanced:
      break;
  }
  return Verdict::pass_to_kernel();
}

}  // namespace ferry::packet
