// The L3/L4 half of the balance action.
#include "lib/packet/balance.hh"

#include "lib/packet/flow_hash.hh"
#include "lib/packet/rewrite.hh"

namespace ferry::packet {

std::string_view to_string(BalanceStep s) {
  switch (s) {
    case BalanceStep::to_backend:
      return "to_backend";
    case BalanceStep::to_client:
      return "to_client";
    case BalanceStep::no_backend:
      return "no_backend";
    case BalanceStep::ttl_expired:
      return "ttl_expired";
    case BalanceStep::not_balanced:
      return "not_balanced";
    case BalanceStep::malformed:
      return "malformed";
  }
  return "unknown";
}

std::uint16_t choose_backend(const Service& service, const ParsedPacket& p,
                             std::uint64_t flow_hash_seed) noexcept {
  return service.maglev.lookup(flow_hash(p, flow_hash_seed));
}

namespace detail {

BalanceStep balance_precheck(ConstFrameBytes frame, const ParsedPacket& p,
                             const ServiceMatch& m) noexcept {
  if (m.kind == MatchKind::none || m.service->action != ServiceAction::balance) {
    return BalanceStep::not_balanced;
  }
  if (!frame_matches(frame, p)) return BalanceStep::malformed;
  // Checked before rewriting so a frame that is not forwarded is left exactly as it came.
  if (!hop_limit_allows_forward(p)) return BalanceStep::ttl_expired;
  return m.kind == MatchKind::to_service ? BalanceStep::to_backend : BalanceStep::to_client;
}

BalanceStep rewrite_to_backend(FrameBytes frame, ParsedPacket& p, const Service& s,
                               std::uint16_t backend) noexcept {
  if (backend >= s.backends.size()) return BalanceStep::no_backend;  // kNoBackend among them
  const net::Endpoint& to = s.backends[backend];
  rewrite_endpoint(frame, p, Side::destination, to.address.bytes, to.port);
  return BalanceStep::to_backend;
}

BalanceStep rewrite_to_client(FrameBytes frame, ParsedPacket& p, const Service& s) noexcept {
  rewrite_endpoint(frame, p, Side::source, s.vip.bytes, s.port);
  return BalanceStep::to_client;
}

}  // namespace detail

BalanceStep balance_rewrite(FrameBytes frame, ParsedPacket& p, const ServiceTable& table) noexcept {
  return balance_rewrite(frame, p, table, MaglevChoice{table.flow_hash_seed()});
}

}  // namespace ferry::packet
