// The balance action: UDP DNAT. Client -> VIP:port goes to the backend Maglev picks for the flow
// (or the caller's chooser: the fast path's flow table); backend -> client replies get VIP:port
// back as their source, statelessly, so any worker can take a reply. Keeps no per-flow state.
// The frame's service comes matched (ServiceTable::match): the action never matches it again.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "lib/packet/bytes.hh"
#include "lib/packet/fate.hh"
#include "lib/packet/flow_hash.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/route.hh"
#include "lib/packet/service_table.hh"

namespace ferry::packet {

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
// What balance_rewrite does with a frame matching `m` before any rewrite: forward when it is a
// request or a reply that may be forwarded, or why the frame is left untouched (unexpected: no
// balance service matches).
Verdict balance_precheck(ConstFrameBytes frame, const ParsedPacket& p,
                         const ServiceMatch& m) noexcept;
Verdict rewrite_to_backend(FrameBytes frame, ParsedPacket& p, const Service& s,
                           std::uint16_t backend) noexcept;
Verdict rewrite_to_client(FrameBytes frame, ParsedPacket& p, const Service& s) noexcept;
}  // namespace detail

// The L3/L4 half, for a frame whose service `m` was matched: rewrites the destination (request)
// or source (reply) address and port, with the IPv4 header and UDP/TCP checksums updated
// incrementally (UDP checksum 0 stays 0). A request goes to `choose(service, p)` (a backend index
// of the service, or MaglevTable::kNoBackend), which is asked only for a request that will be
// forwarded: the fast path's flow table is one such chooser. Replies are stateless whatever the
// chooser. Returns forward (egress port 0: the route step picks it) once rewritten, or the drop:
// no_backend, ttl_expired, malformed (frame untouched), unexpected (no balance service matched).
template <typename ChooseBackend>
Verdict balance_rewrite(FrameBytes frame, ParsedPacket& p, const ServiceMatch& m,
                        ChooseBackend&& choose) noexcept {
  Verdict v = detail::balance_precheck(frame, p, m);
  if (v.fate != Fate::forward) return v;
  if (m.kind == MatchKind::to_service) {
    return detail::rewrite_to_backend(frame, p, *m.service, choose(*m.service, std::as_const(p)));
  }
  return detail::rewrite_to_client(frame, p, *m.service);
}

// ... matching the frame in `table`, with the backend Maglev chooses (choose_backend()).
Verdict balance_rewrite(FrameBytes frame, ParsedPacket& p, const ServiceTable& table) noexcept;

// The whole action: balance_rewrite, then the route step (hop limit, checksum, MACs) towards the
// rewritten destination, whose next hop the caller's `resolve` finds (see route_via()).
// `choose` as for balance_rewrite.
template <typename ChooseBackend, typename ResolveNextHop>
Verdict balance(FrameBytes frame, ParsedPacket& p, const ServiceMatch& m, ChooseBackend&& choose,
                ResolveNextHop&& resolve) noexcept {
  Verdict v = balance_rewrite(frame, p, m, std::forward<ChooseBackend>(choose));
  if (v.fate != Fate::forward) return v;
  return route_via(frame, p, std::forward<ResolveNextHop>(resolve));
}

// ... matching the frame in `table`, with the backend Maglev chooses.
template <typename ResolveNextHop>
Verdict balance(FrameBytes frame, ParsedPacket& p, const ServiceTable& table,
                ResolveNextHop&& resolve) noexcept {
  return balance(frame, p, table.match(p), MaglevChoice{table.flow_hash_seed()},
                 std::forward<ResolveNextHop>(resolve));
}

}  // namespace ferry::packet
