// The per-frame decision of the AF_XDP workers.
#include "lib/fastpath/frame_processor.hh"

#include "lib/fastpath/encap_step.hh"
#include "lib/fastpath/frame_steps.hh"
#include "lib/fastpath/ip_hop.hh"
#include "lib/fastpath/quic_choice.hh"
#include "lib/packet/balance.hh"
#include "lib/packet/checksum.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/reflect.hh"
#include "lib/packet/route.hh"

namespace ferry::fastpath {
namespace steps {

packet::Verdict resolve_on(const Snapshot& s, std::uint32_t port, packet::IpVersion version,
                           const std::array<std::uint8_t, 16>& next_hop, FrameSinks sinks,
                           NeighbourKey& missed, packet::NextHop& out) noexcept {
  out.egress_port = port;
  out.src_mac = s.port_macs[port];
  const packet::MacAddress* mac = s.next_hops->neighbours.find(port, version, next_hop);
  if (!mac) {
    missed = NeighbourKey{port, version, next_hop};
    switch (sinks.queue.push(missed)) {
      case Queued::added:
        sinks.counters.resolutions_requested.add();
        break;
      case Queued::full:
        sinks.counters.resolution_queue_full.add();
        break;
      case Queued::already_waiting:
        break;
    }
    return packet::Verdict::hold(port);
  }
  out.dst_mac = *mac;
  return packet::Verdict::forward(port);
}

bool MtuCheck::fits(packet::ConstFrameBytes frame, const packet::ParsedPacket& q,
                    std::uint32_t port) noexcept {
  if (!active || port >= ports->mtu.size()) return true;
  std::uint32_t mtu = ports->mtu[port];
  if (mtu == 0 || q.l3_bytes <= mtu) return true;
  if (q.is_v4() && !packet::ipv4_dont_fragment(frame, q)) {
    fragment_mtu = mtu;
    return true;
  }
  too_big_mtu = mtu;
  return false;
}

packet::Verdict KernelNextHop::operator()(const packet::ParsedPacket& q, packet::NextHop& out) {
  const KernelRoute* r = s.next_hops->routes.lookup(q.dst_address, q.version);
  if (!r) return packet::Verdict::dropped(Drop::no_route);
  if (!mtu.fits(frame, q, r->port)) return packet::Verdict::dropped(Drop::too_big);
  const auto& next_hop = r->gateway ? r->gateway->bytes : q.dst_address;
  return resolve_on(s, r->port, q.version, next_hop, sinks, missed, out);
}

packet::Verdict ConfiguredNextHop::operator()(const packet::ParsedPacket& q, packet::NextHop& out) {
  // A configured route names the egress port; the kernel's routes on that port say whether the
  // destination is on the link or behind a gateway.
  const KernelRoute* r = s.next_hops->routes.lookup(q.dst_address, q.version, route.egress_port);
  if (!mtu.fits(frame, q, route.egress_port)) return packet::Verdict::dropped(Drop::too_big);
  const auto& next_hop = r && r->gateway ? r->gateway->bytes : q.dst_address;
  return resolve_on(s, route.egress_port, q.version, next_hop, sinks, missed, out);
}

packet::ServiceMatch match_frame(const ConfigTables& tables, const packet::ParsedPacket& p,
                                 const packet::MatchHint& hint, FrameSinks sinks) noexcept {
  packet::ServiceMatch match = tables.services.match(p, hint);
  if (!match.hinted && match.kind != packet::MatchKind::none)
    sinks.counters.matched_without_hint.add();
  return match;
}

std::uint16_t RequestChooser::operator()(const packet::Service& service,
                                         const packet::ParsedPacket& q) const noexcept {
  if (service.quic_lb && q.protocol == IPPROTO_UDP) {
    std::uint16_t b = quic_lb_backend(service, frame, q, sinks.counters);
    if (b != packet::MaglevTable::kNoBackend) return b;
  }
  std::uint64_t seed = tables.services.flow_hash_seed();
  if (flows.table && service.flow_affinity) {
    return flows.table->backend_for(service, q, seed, flows.now_ms);
  }
  return packet::choose_backend(service, q, seed);
}

Acted act(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
          std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows,
          const packet::MatchHint& hint) noexcept {
  return act(frame, p, s, ingress_slot, sinks, flows, match_frame(*s.config, p, hint, sinks));
}

Acted act(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
          std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows,
          const packet::ServiceMatch& match) noexcept {
  NeighbourKey missed{};
  const ConfigTables& tables = *s.config;
  // Only a datagram larger than the smallest MTU of the ports can be too big for one: only it
  // pays for the check and for keeping its endpoints as they arrived.
  MtuCheck mtu = MtuCheck::of(s, p);
  packet::ParsedPacket arrived;
  if (mtu.active) arrived = p;
  FrameOutcome o = FrameOutcome::dropped(Drop::unexpected);
  if (match.kind == packet::MatchKind::to_service &&
      match.service->action == packet::ServiceAction::reflect) {
    return {outcome(packet::reflect(frame, p, ingress_slot), missed)};
  }
  // Requests to an encapsulating service never come here: process_frame() and process_fragment()
  // encapsulate them (encap_step.hh).
  if (match.kind == packet::MatchKind::to_service && match.service->encapsulates()) {
    return {FrameOutcome::dropped(Drop::unexpected)};
  }
  std::uint32_t counter_slot = packet::kNoCounterSlot;
  if (match.kind != packet::MatchKind::none) {
    // Requests go where RequestChooser says; replies never ask. Balanced traffic leaves by the
    // kernel's route to the rewritten destination.
    KernelNextHop next_hop{s, sinks, missed, mtu, frame};
    std::uint16_t chosen = packet::MaglevTable::kNoBackend;
    auto choose = [&chosen, request = RequestChooser{frame, tables, sinks, flows}](
                      const packet::Service& service, const packet::ParsedPacket& q) {
      return chosen = request(service, q);
    };
    o = outcome(packet::balance(frame, p, match, choose, next_hop), missed);
    if (o.fate != Fate::drop) {
      if (match.kind == packet::MatchKind::to_service) {
        counter_slot = match.service->counter_slot(chosen);
        sinks.to_backend(counter_slot, p.l3_bytes);
      } else {
        counter_slot = match.service->counter_slot(match.backend);
        sinks.from_backend(counter_slot, p.l3_bytes);
      }
    }
  } else if (const packet::RouteEntry* route = tables.routes.lookup(p)) {
    ConfiguredNextHop next_hop{s, *route, sinks, missed, mtu, frame};
    o = outcome(packet::route_via(frame, p, next_hop), missed);
  }
  if (o.fate == Fate::drop && o.drop == Drop::too_big) {
    // The error quotes the datagram as its sender sent it, so its stack finds the socket.
    if (p.dst_address != arrived.dst_address || p.dst_port != arrived.dst_port) {
      packet::rewrite_endpoint(frame, p, packet::Side::destination, arrived.dst_address,
                               arrived.dst_port);
    }
    if (p.src_address != arrived.src_address || p.src_port != arrived.src_port) {
      packet::rewrite_endpoint(frame, p, packet::Side::source, arrived.src_address,
                               arrived.src_port);
    }
    return {o, mtu.too_big_mtu};
  }
  if (o.fate != Fate::drop) o.fragment_mtu = mtu.fragment_mtu;
  return {o, 0, counter_slot};
}

FrameOutcome send_generated(packet::FrameBytes frame, const packet::ParsedPacket& p,
                            const Snapshot& s, FrameSinks sinks) noexcept {
  const KernelRoute* r = s.next_hops->routes.lookup(p.dst_address, p.version);
  if (!r) return FrameOutcome::dropped(Drop::no_route);
  return send_along(frame, p, *r, s, sinks);
}

FrameOutcome send_along(packet::FrameBytes frame, const packet::ParsedPacket& p,
                        const KernelRoute& r, const Snapshot& s, FrameSinks sinks) noexcept {
  NeighbourKey missed{};
  packet::NextHop hop;
  const auto& next_hop = r.gateway ? r.gateway->bytes : p.dst_address;
  packet::Verdict v = resolve_on(s, r.port, p.version, next_hop, sinks, missed, hop);
  if (v.fate == Fate::hold) hop.dst_mac = {};
  std::memcpy(frame.data(), hop.dst_mac.data(), hop.dst_mac.size());
  std::memcpy(frame.data() + 6, hop.src_mac.data(), hop.src_mac.size());
  return outcome(v, missed);
}

FrameOutcome answer_with_error(packet::FrameBytes frame, packet::ParsedPacket& p,
                               const packet::IcmpReason& reason, Drop why, const Snapshot& s,
                               FrameSinks sinks, const IpHop& hop) noexcept {
  // RFC 1812 4.3.2.7, RFC 4443 2.4 (e): no error about a fragment but the first, nor about an ICMP
  // error (the only ICMP the fast path carries: one about a reply, on its way into a tunnel).
  const bool icmp_error = p.protocol == IPPROTO_ICMP || p.protocol == IPPROTO_ICMPV6;
  if (!hop.icmp_limit || !hop.next_ip_id || !s.ports || p.fragment_tail || icmp_error) {
    return FrameOutcome::dropped(why);
  }
  const KernelRoute* r = s.next_hops->routes.lookup(p.src_address, p.version);
  const PortAddress* source = r ? s.ports->source_for(r->port, p.version) : nullptr;
  if (!source) return FrameOutcome::dropped(why);
  if (!hop.icmp_limit->allow(p.src_address, hop.now_ms)) {
    sinks.counters.icmp_rate_limited.add();
    return FrameOutcome::dropped(why);
  }
  packet::FrameBytes room(frame.data(), frame.size() + hop.room);
  std::uint32_t length =
      packet::build_icmp_error(room, p, reason, source->bytes, (*hop.next_ip_id)++);
  if (length == 0) return FrameOutcome::dropped(why);
  FrameOutcome o = send_generated(packet::FrameBytes(frame.data(), length), p, s, sinks);
  if (o.fate == Fate::drop) return o;
  sinks.counters.drops[static_cast<std::size_t>(why)].add();
  (why == Drop::ttl_expired ? sinks.counters.icmp_time_exceeded : sinks.counters.icmp_too_big)
      .add();
  o.length = length;
  return o;
}

packet::IcmpReason time_exceeded(packet::IpVersion v) {
  return {v == packet::IpVersion::v4 ? packet::kIcmpTimeExceeded : packet::kIcmp6TimeExceeded, 0,
          0};
}

packet::IcmpReason too_big(packet::IpVersion v, std::uint32_t mtu) {
  return v == packet::IpVersion::v4 ? packet::IcmpReason{packet::kIcmpDestinationUnreachable,
                                                         packet::kIcmpFragmentationNeeded, mtu}
                                    : packet::IcmpReason{packet::kIcmp6PacketTooBig, 0, mtu};
}

FrameOutcome answer_drop(packet::FrameBytes frame, packet::ParsedPacket& p, const Acted& a,
                         const Snapshot& s, FrameSinks sinks, const IpHop& hop) noexcept {
  if (a.outcome.drop == Drop::ttl_expired) {
    return answer_with_error(frame, p, time_exceeded(p.version), Drop::ttl_expired, s, sinks, hop);
  }
  if (a.outcome.drop == Drop::too_big) {
    return answer_with_error(frame, p, too_big(p.version, a.too_big_mtu), Drop::too_big, s, sinks,
                             hop);
  }
  return a.outcome;
}

}  // namespace steps

FrameOutcome process_frame(packet::FrameBytes frame, const Snapshot& s, std::uint32_t ingress_slot,
                           FrameSinks sinks, FlowAffinity flows, IpHop hop,
                           packet::MatchHint hint) noexcept {
  packet::ParsedPacket p;
  packet::ParseError err = packet::parse_frame(frame, p);
  if (err != packet::ParseError::none) {
    if (is_udp_fragment(err, p)) {
      return process_fragment(frame, p, s, ingress_slot, sinks, flows, hop);
    }
    if (is_icmp(err, p)) return process_icmp_error(frame, p, hop, s, sinks, flows);
    return FrameOutcome::dropped(packet::passes_to_kernel(err) ? Drop::unexpected
                                                               : Drop::malformed);
  }
  // Decided on the frame as it came: the signature is the pseudo-header of the original addresses.
  packet::L4Checksum checksum = packet::classify_l4_checksum(frame, p);
  packet::ServiceMatch match = steps::match_frame(*s.config, p, hint, sinks);
  if (match.kind == packet::MatchKind::to_service && match.service->encapsulates()) {
    return encapsulate(frame, p, *match.service, checksum, s, sinks, flows, hop);
  }
  if (p.protocol != IPPROTO_UDP) return FrameOutcome::dropped(Drop::unexpected);
  steps::Acted a = steps::act(frame, p, s, ingress_slot, sinks, flows, match);
  if (a.outcome.fate == Fate::drop) return steps::answer_drop(frame, p, a, s, sinks, hop);
  steps::finish_checksum(frame, p, checksum, sinks.counters);
  return a.outcome;
}

}  // namespace ferry::fastpath
