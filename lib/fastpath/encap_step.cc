// Direct server return: a request sent to its backend inside an outer header.
#include "lib/fastpath/encap_step.hh"

#include "lib/fastpath/frame_steps.hh"
#include "lib/packet/encap.hh"
#include "lib/packet/flow_hash.hh"
#include "lib/packet/fragment.hh"
#include "lib/packet/rewrite.hh"

namespace ferry::fastpath {
namespace {

EncapPath path_of(packet::EncapKind kind, bool outer_v6) {
  if (kind == packet::EncapKind::ipip) return outer_v6 ? EncapPath::ipip6 : EncapPath::ipip4;
  return outer_v6 ? EncapPath::gue6 : EncapPath::gue4;
}

// IPv4 without DF, in 2..kMaxFragmentPieces pieces of at most `inner_mtu` IP bytes.
bool may_cut(packet::ConstFrameBytes frame, const packet::ParsedPacket& p,
             std::uint32_t inner_mtu) noexcept {
  if (packet::ipv4_dont_fragment(frame, p)) return false;  // IPv6: 0 pieces below
  const std::uint32_t pieces = packet::ipv4_fragment_count(p, inner_mtu);
  return pieces >= 2 && pieces <= packet::kMaxFragmentPieces;
}

}  // namespace

FrameOutcome encapsulate(packet::FrameBytes frame, packet::ParsedPacket& p,
                         const packet::Service& service, packet::L4Checksum checksum,
                         const Snapshot& s, FrameSinks sinks, FlowAffinity flows, const IpHop& hop,
                         std::optional<EncapTarget>* sent_to) noexcept {
  std::uint16_t b = steps::RequestChooser{frame, *s.config, sinks, flows}(service, p);
  return encapsulate_to(frame, p, service, b, checksum, s, sinks, hop, sent_to);
}

FrameOutcome encapsulate_to(packet::FrameBytes frame, packet::ParsedPacket& p,
                            const packet::Service& service, std::uint16_t b,
                            packet::L4Checksum checksum, const Snapshot& s, FrameSinks sinks,
                            const IpHop& hop, std::optional<EncapTarget>* sent_to) noexcept {
  if (!packet::hop_limit_allows_forward(p)) {
    return steps::answer_with_error(frame, p, steps::time_exceeded(p.version), Drop::ttl_expired, s,
                                    sinks, hop);
  }
  if (b == packet::MaglevTable::kNoBackend || b >= service.backends.size()) {
    return FrameOutcome::dropped(Drop::no_backend);
  }
  return encapsulate_as(frame, p, target_of(service, b, p, *s.config), checksum, s, sinks, hop,
                        sent_to);
}

EncapTarget target_of(const packet::Service& service, std::uint16_t b,
                      const packet::ParsedPacket& p, const ConfigTables& tables) noexcept {
  EncapTarget t;
  t.kind = service.forwarding == config::Forwarding::ipip ? packet::EncapKind::ipip
                                                          : packet::EncapKind::gue;
  t.backend = service.backends[b].address;
  t.flow_hash = static_cast<std::uint32_t>(packet::flow_hash(p, tables.services.flow_hash_seed()));
  t.counter_slot = service.counter_slot(b);
  return t;
}

// encapsulate_as() and encapsulate_piece(): `piece` is a piece of a packet cut for the tunnel,
// settled already (checksum, hop limit) and never cut again.
FrameOutcome encapsulate_checked(packet::FrameBytes frame, packet::ParsedPacket& p,
                                 const EncapTarget& t, packet::L4Checksum checksum,
                                 const Snapshot& s, FrameSinks sinks, const IpHop& hop,
                                 std::optional<EncapTarget>* sent_to, bool piece) noexcept {
  const ConfigTables& tables = *s.config;
  const bool outer_v6 = !t.backend.is_v4();
  // Validation gives every encapsulating service the source its backends' family needs.
  const std::optional<net::IpAddress>& source = !tables.encap ? std::nullopt
                                                : outer_v6    ? tables.encap->source6
                                                              : tables.encap->source;
  if (!source) return FrameOutcome::dropped(Drop::no_route);
  const std::uint32_t overhead = packet::encap_overhead(t.kind, outer_v6);

  // The outer packet leaves by the kernel's route to the backend; it must fit that link whole.
  const auto version = outer_v6 ? packet::IpVersion::v6 : packet::IpVersion::v4;
  const KernelRoute* r = s.next_hops->routes.lookup(t.backend.bytes, version);
  if (!r) return FrameOutcome::dropped(Drop::no_route);
  std::uint32_t mtu = s.ports && r->port < s.ports->mtu.size() ? s.ports->mtu[r->port] : 0;
  if (mtu != 0 && packet::encapsulated_ip_bytes(p.l3_bytes, t.kind, outer_v6) > mtu) {
    std::uint32_t inner_mtu = mtu > overhead ? mtu - overhead : 0;
    if (piece) return FrameOutcome::dropped(Drop::too_big);
    if (hop.tunnel_cut != nullptr && may_cut(frame, p, inner_mtu)) {
      // As a router fragments a datagram that allows it: settled whole, then cut by the worker,
      // each piece in its own outer header to the same backend (which reassembles them).
      steps::finish_checksum(frame, p, checksum, sinks.counters);
      packet::decrement_hop_limit(frame, p);
      *hop.tunnel_cut = TunnelCut{frame.data(), inner_mtu, t};
      if (sent_to) *sent_to = t;
      FrameOutcome o = FrameOutcome::to(0);
      o.fragment_mtu = inner_mtu;
      return o;
    }
    return steps::answer_with_error(frame, p, steps::too_big(p.version, inner_mtu), Drop::too_big,
                                    s, sinks, hop);
  }
  if (hop.headroom < overhead) return FrameOutcome::dropped(Drop::no_headroom);

  // The inner packet as it will arrive: checksum whole, one hop less.
  if (!piece) {
    steps::finish_checksum(frame, p, checksum, sinks.counters);
    packet::decrement_hop_limit(frame, p);
  }

  packet::EncapHeader outer;
  outer.kind = t.kind;
  outer.destination = t.backend;
  // Only IPIP over IPv4 varies its source within source_prefix; GUE spreads flows by its UDP
  // source port and IPv6 by its flow label, both from `source` / `source6` (docs/dsr.md).
  const bool source_per_flow =
      t.kind == packet::EncapKind::ipip && !outer_v6 && tables.encap->source_prefix;
  outer.source = source_per_flow ? packet::ipip_source_in_prefix(*tables.encap->source_prefix,
                                                                 *source, t.flow_hash)
                                 : *source;
  outer.gue_port = tables.encap->gue_port;
  outer.ip_id = hop.next_ip_id ? (*hop.next_ip_id)++ : 0;
  outer.flow_hash = t.flow_hash;
  const std::uint32_t inner_bytes = p.l3_bytes;
  packet::FrameBytes room(frame.data() - hop.headroom, hop.headroom + frame.size());
  packet::Encapsulated e = packet::encapsulate(room, hop.headroom, p, outer);
  if (!e.ok()) return FrameOutcome::dropped(Drop::malformed);
  if (sent_to) *sent_to = t;

  // p is the outer packet now, to the backend: along the route the MTU was checked on.
  FrameOutcome o = steps::send_along(e.frame(room), p, *r, s, sinks);
  EncapPath path = path_of(t.kind, outer_v6);
  sinks.counters.encapsulated_packets[static_cast<std::size_t>(path)].add();
  sinks.counters.encapsulated_bytes[static_cast<std::size_t>(path)].add(inner_bytes);
  sinks.to_backend(t.counter_slot, inner_bytes);
  o.front = hop.headroom - e.frame_offset;
  o.length = e.frame_bytes;
  return o;
}

FrameOutcome encapsulate_as(packet::FrameBytes frame, packet::ParsedPacket& p, const EncapTarget& t,
                            packet::L4Checksum checksum, const Snapshot& s, FrameSinks sinks,
                            const IpHop& hop, std::optional<EncapTarget>* sent_to) noexcept {
  return encapsulate_checked(frame, p, t, checksum, s, sinks, hop, sent_to, false);
}

FrameOutcome encapsulate_piece(packet::FrameBytes frame, packet::ParsedPacket& p,
                               const EncapTarget& t, const Snapshot& s, FrameSinks sinks,
                               const IpHop& hop) noexcept {
  return encapsulate_checked(frame, p, t, packet::L4Checksum::full, s, sinks, hop, nullptr, true);
}

}  // namespace ferry::fastpath
