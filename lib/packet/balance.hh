// The balance action: UDP DNAT. Client -> VIP:port goes to the backend Maglev picks for the flow
// (or the caller's chooser: the fast path's flow table); backend -> client replies get VIP:port
// back as their source, statelessly, so any worker can take a reply. Keeps no per-flow state.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "lib/packet/bytes.hh"
#include "lib/packet/flow_hash.hh"
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

// The backend balance_rewrite would choose for a request, or MaglevTable::kNoBackend. Pure.
std::uint16_t choose_backend(const Service& service, const ParsedPacket& p,
                             std::uint64_t flow_hash_seed) noexcept;

// The chooser of balance_rewrite() and balance() without per-flow state: choose_backend().
struct MaglevChoice {
  std::uint64_t flow_hash_seed = kDefaultFlowHashSeed;
  std::uint16_t operator()(const Service& s, const ParsedPacket& p) const noexcept {
    return choose_backend(s, p, flow_hash_seed);
  }
};

namespace detail {
// What balance_rewrite does with a frame matching `m` before any rewrite: to_backend for a request
// and to_client for a reply that may be forwarded, or why the frame is left untouched.
BalanceStep balance_precheck(ConstFrameBytes frame, const ParsedPacket& p,
                             const ServiceMatch& m) noexcept;
BalanceStep rewrite_to_backend(FrameBytes frame, ParsedPacket& p, const Service& s,
                               std::uint16_t backend) noexcept;
BalanceStep rewrite_to_client(FrameBytes frame, ParsedPacket& p, const Service& s) noexcept;
}  // namespace detail

// The L3/L4 half: rewrites the destination (request) or source (reply) address and port, with
// the IPv4 header and UDP/TCP checksums updated incrementally (UDP checksum 0 stays 0). A request
// goes to `choose(service, p)` (a backend index of the service, or MaglevTable::kNoBackend), which
// is asked only for a request that will be forwarded: the fast path's flow table is one such
// chooser. Replies are stateless whatever the chooser.
template <typename ChooseBackend>
BalanceStep balance_rewrite(FrameBytes frame, ParsedPacket& p, const ServiceTable& table,
                            ChooseBackend&& choose) noexcept {
  ServiceMatch m = table.match(p);
  BalanceStep step = detail::balance_precheck(frame, p, m);
  if (step == BalanceStep::to_backend) {
    return detail::rewrite_to_backend(frame, p, *m.service, choose(*m.service, std::as_const(p)));
  }
  if (step == BalanceStep::to_client) return detail::rewrite_to_client(frame, p, *m.service);
  return step;
}

// ... with the backend Maglev chooses (choose_backend()).
BalanceStep balance_rewrite(FrameBytes frame, ParsedPacket& p, const ServiceTable& table) noexcept;

// The whole action: balance_rewrite, then the route step (hop limit, checksum, MACs) towards the
// rewritten destination, whose next hop the caller's `resolve` finds (see route_via()).
// Not a balanced flow -> pass_to_kernel verdict (the worker tries its other actions first).
// `choose` as for balance_rewrite.
template <typename ChooseBackend, typename ResolveNextHop>
Verdict balance(FrameBytes frame, ParsedPacket& p, const ServiceTable& table,
                ChooseBackend&& choose, ResolveNextHop&& resolve) noexcept {
  switch (balance_rewrite(frame, p, table, std::forward<ChooseBackend>(choose))) {
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

template <typename ResolveNextHop>
Verdict balance(FrameBytes frame, ParsedPacket& p, const ServiceTable& table,
                ResolveNextHop&& resolve) noexcept {
  return balance(frame, p, table, MaglevChoice{table.flow_hash_seed()},
                 std::forward<ResolveNextHop>(resolve));
}

}  // namespace ferry::packet
