// The L3/L4 half of the balance action.
#include "lib/packet/balance.hh"

#include "lib/packet/flow_hash.hh"
#include "lib/packet/rewrite.hh"

namespace ferry::packet {

std::uint16_t choose_backend(const Service& service, const ParsedPacket& p,
                             std::uint64_t flow_hash_seed) noexcept {
  return service.maglev.lookup(flow_hash(p, flow_hash_seed));
}

namespace detail {

Verdict balance_precheck(ConstFrameBytes frame, const ParsedPacket& p,
                         const ServiceMatch& m) noexcept {
  if (m.kind == MatchKind::none || m.service->action != ServiceAction::balance) {
    return Verdict::dropped(Drop::unexpected);
  }
  if (!frame_matches(frame, p)) return Verdict::dropped(Drop::malformed);
  // Checked before rewriting so a frame that is not forwarded is left exactly as it came.
  if (!hop_limit_allows_forward(p)) return Verdict::dropped(Drop::ttl_expired);
  return Verdict::forward(0);
}

Verdict rewrite_to_backend(FrameBytes frame, ParsedPacket& p, const Service& s,
                           std::uint16_t backend) noexcept {
  if (backend >= s.backends.size()) return Verdict::dropped(Drop::no_backend);  // kNoBackend too
  const net::Endpoint& to = s.backends[backend];
  rewrite_endpoint(frame, p, Side::destination, to.address.bytes, to.port);
  return Verdict::forward(0);
}

Verdict rewrite_to_client(FrameBytes frame, ParsedPacket& p, const Service& s) noexcept {
  rewrite_endpoint(frame, p, Side::source, s.vip.bytes, s.port);
  return Verdict::forward(0);
}

}  // namespace detail

Verdict balance_rewrite(FrameBytes frame, ParsedPacket& p, const ServiceTable& table) noexcept {
  return balance_rewrite(frame, p, table.match(p), MaglevChoice{table.flow_hash_seed()});
}

}  // namespace ferry::packet
