// Fragments and ICMP errors on the fast path (see ip_hop.hh).
#include "lib/fastpath/ip_hop.hh"

#include "lib/fastpath/encap_step.hh"
#include "lib/fastpath/frame_steps.hh"
#include "lib/packet/balance.hh"
#include "lib/packet/fragment.hh"
#include "lib/packet/icmp.hh"
#include "lib/packet/reflect.hh"
#include "lib/packet/rewrite.hh"
#include "lib/packet/route.hh"

namespace ferry::fastpath {
namespace {

// What the first fragment's action did to its addresses, for the rest of the datagram.
FragmentDecision decision_of(const packet::ParsedPacket& arrived, const packet::ParsedPacket& p,
                             std::uint32_t ingress_slot) {
  FragmentDecision d;
  if (p.dst_address == arrived.src_address && p.src_address == arrived.dst_address &&
      arrived.src_address != arrived.dst_address) {
    d.rewrite = FragmentRewrite::reflect;  // both changed: swapped
    d.port = ingress_slot;
  } else if (p.dst_address != arrived.dst_address) {
    d.rewrite = FragmentRewrite::destination;
    d.address = p.dst_address;
  } else if (p.src_address != arrived.src_address) {
    d.rewrite = FragmentRewrite::source;
    d.address = p.src_address;
  }
  return d;
}

// A later fragment of a decided datagram: its first fragment's addresses, then one routed hop
// like the first (balanced ones by the kernel's route to the new destination, routed ones by
// their configured route). No error is sent about a later fragment (RFC 1812 4.3.2.7).
FrameOutcome follow_first(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
                          FrameSinks sinks, const FragmentDecision& d, const IpHop& hop) {
  // As the first fragment went: swapped, TTL kept, back out of the port it came in on.
  if (d.rewrite == FragmentRewrite::reflect) {
    return steps::outcome(packet::reflect(frame, p, d.port), NeighbourKey{});
  }
  if (!packet::hop_limit_allows_forward(p)) return FrameOutcome::dropped(Drop::ttl_expired);
  if (d.rewrite == FragmentRewrite::encapsulate) {
    // Into the first fragment's tunnel to its backend, under the same outer source or port.
    EncapTarget t = d.encap;
    if (d.tables_serial != s.config->backend_slots.serial())
      t.counter_slot = packet::kNoCounterSlot;
    return encapsulate_as(frame, p, t, packet::L4Checksum::full, s, sinks, hop);
  }
  if (d.rewrite == FragmentRewrite::destination) {
    packet::rewrite_address(frame, p, packet::Side::destination, d.address);
  } else if (d.rewrite == FragmentRewrite::source) {
    packet::rewrite_address(frame, p, packet::Side::source, d.address);
  }
  NeighbourKey missed{};
  steps::MtuCheck mtu = steps::MtuCheck::of(s, p);
  FrameOutcome o = FrameOutcome::dropped(Drop::unexpected);
  if (d.rewrite != FragmentRewrite::none) {
    steps::KernelNextHop next_hop{s, sinks, missed, mtu, frame};
    o = steps::outcome(packet::route_via(frame, p, next_hop), missed);
  } else if (const packet::RouteEntry* route = s.config->routes.lookup(p)) {
    steps::ConfiguredNextHop next_hop{s, *route, sinks, missed, mtu, frame};
    o = steps::outcome(packet::route_via(frame, p, next_hop), missed);
  }
  if (o.fate == Fate::drop) return o;
  o.fragment_mtu = mtu.fragment_mtu;
  // A slot recorded under other tables may count for another backend now: not counted then.
  if (d.tables_serial == s.config->backend_slots.serial()) {
    if (d.rewrite == FragmentRewrite::destination) sinks.to_backend(d.counter_slot, p.l3_bytes);
    if (d.rewrite == FragmentRewrite::source) sinks.from_backend(d.counter_slot, p.l3_bytes);
  }
  return o;
}

// The quoted datagram's tuple turned around (its destination as the source): for a quoted reply
// the request of its flow, for a quoted request the reply its backend would send.
packet::ParsedPacket reversed_quote(const packet::ParsedPacket& outer, const packet::IcmpError& e) {
  packet::ParsedPacket q;
  q.version = outer.version;
  q.protocol = IPPROTO_UDP;
  q.src_address = e.quoted_dst;
  q.src_port = e.quoted_dst_port;
  q.dst_address = e.quoted_src;
  q.dst_port = e.quoted_src_port;
  return q;
}

// The first fragment of a datagram to an encapsulating service: to the backend its UDP header
// chooses, encapsulated as a whole request is (an answer if it does not fit the tunnel), and the
// datagram's later fragments are to follow it there (or be refused with it).
FrameOutcome encapsulate_first(packet::FrameBytes frame, packet::ParsedPacket& p,
                               const packet::Service& service, const Snapshot& s, FrameSinks sinks,
                               FlowAffinity flows, const IpHop& hop, std::uint32_t slot) {
  std::optional<EncapTarget> sent_to;
  FrameOutcome o =
      encapsulate(frame, p, service, packet::L4Checksum::full, s, sinks, flows, hop, &sent_to);
  if (o.fate == Fate::drop || !sent_to) {  // dropped, or answered in its place (too big, expiring)
    hop.fragments->refuse(slot);
    return o;
  }
  FragmentDecision decision;
  decision.rewrite = FragmentRewrite::encapsulate;
  decision.encap = *sent_to;
  decision.tables_serial = s.config->backend_slots.serial();
  hop.fragments->decide(slot, decision);
  sinks.counters.fragments_forwarded.add();
  return o;
}

}  // namespace

FrameOutcome process_fragment(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
                              std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows,
                              const IpHop& hop) noexcept {
  if (!hop.fragments) return FrameOutcome::dropped(Drop::unexpected);
  packet::Fragment f;
  const packet::FragmentParse parsed = packet::parse_fragment(frame, p, f);
  switch (parsed) {
    case packet::FragmentParse::fragment:
    case packet::FragmentParse::tiny_first:
      break;
    case packet::FragmentParse::malformed:
      return FrameOutcome::dropped(Drop::malformed);
    case packet::FragmentParse::not_a_fragment:
    case packet::FragmentParse::not_udp:
      return FrameOutcome::dropped(Drop::unexpected);
  }
  std::uint32_t slot = 0;
  auto give_up = [&hop](const FragmentTable::HeldFrame& h) {
    if (hop.orphan_count && *hop.orphan_count < hop.orphans.size()) {
      hop.orphans[(*hop.orphan_count)++] = h.addr;
    }
  };
  FragmentSeen seen = hop.fragments->record(fragment_key(p, f), f, hop.now_ms, slot, give_up);
  if (parsed == packet::FragmentParse::tiny_first) {
    // No ports to act on (RFC 1858's tiny fragment): the datagram is refused, so that its later
    // fragments are dropped as they come rather than held for a first fragment that will not be.
    hop.fragments->refuse(slot);
    FrameOutcome tiny = FrameOutcome::dropped(Drop::fragment_tiny);
    tiny.release = slot;
    return tiny;
  }
  FrameOutcome refused = FrameOutcome::dropped(Drop::fragment_overlap);
  refused.release = slot;  // what waits for the refused datagram goes too
  switch (seen) {
    case FragmentSeen::duplicate:
      return FrameOutcome::dropped(Drop::fragment_duplicate);
    case FragmentSeen::overlap:
    case FragmentSeen::too_many:
      return refused;
    case FragmentSeen::refused:
      return FrameOutcome::dropped(Drop::fragment_refused);
    case FragmentSeen::decided:
    case FragmentSeen::undecided:
      break;
  }
  if (!f.first()) {
    if (seen == FragmentSeen::undecided) return FrameOutcome::waiting(slot);
    FrameOutcome o = follow_first(frame, p, s, sinks, hop.fragments->decision(slot), hop);
    if (o.fate != Fate::drop) sinks.counters.fragments_forwarded.add();
    return o;
  }
  // The first fragment holds the UDP header: it is acted on as its datagram. Its checksum covers
  // the whole datagram, which only the incremental update can keep right: never finished here
  // (a sender that fragments has computed it anyway).
  packet::ParsedPacket arrived = p;
  const packet::ServiceMatch match = steps::match_frame(*s.config, p, {}, sinks);
  if (match.kind == packet::MatchKind::to_service && match.service->encapsulates()) {
    FrameOutcome o = encapsulate_first(frame, p, *match.service, s, sinks, flows, hop, slot);
    o.release = slot;
    return o;
  }
  steps::Acted a = steps::act(frame, p, s, ingress_slot, sinks, flows, match);
  FrameOutcome o = a.outcome;
  if (o.fate == Fate::drop) {
    hop.fragments->refuse(slot);
    o = steps::answer_drop(frame, p, a, s, sinks, hop);
  } else {
    FragmentDecision decision = decision_of(arrived, p, ingress_slot);
    decision.counter_slot = a.counter_slot;
    decision.tables_serial = s.config->backend_slots.serial();
    hop.fragments->decide(slot, decision);
    sinks.counters.fragments_forwarded.add();
  }
  o.release = slot;
  return o;
}

FrameOutcome follow_held(packet::FrameBytes frame, const Snapshot& s, FrameSinks sinks,
                         const FragmentTable& fragments, std::uint32_t datagram,
                         const IpHop& hop) noexcept {
  if (fragments.refused(datagram)) return FrameOutcome::dropped(Drop::fragment_refused);
  packet::ParsedPacket p;
  packet::Fragment f;
  if (packet::parse_fragment(frame, p, f) != packet::FragmentParse::fragment) {
    return FrameOutcome::dropped(Drop::malformed);  // it parsed when it was held
  }
  FrameOutcome o = follow_first(frame, p, s, sinks, fragments.decision(datagram), hop);
  if (o.fate != Fate::drop) sinks.counters.fragments_forwarded.add();
  return o;
}

FrameOutcome process_icmp_error(packet::FrameBytes frame, packet::ParsedPacket& p, const IpHop& hop,
                                const Snapshot& s, FrameSinks sinks, FlowAffinity flows) noexcept {
  packet::IcmpError e;
  switch (packet::parse_icmp_error(frame, p, e)) {
    case packet::IcmpParse::error:
      break;
    case packet::IcmpParse::malformed:
      return FrameOutcome::dropped(Drop::malformed);
    case packet::IcmpParse::not_an_error:
    case packet::IcmpParse::not_udp:
      return FrameOutcome::dropped(Drop::unexpected);
  }
  // No error is ever sent about an error: one that expires here is dropped.
  if (!packet::hop_limit_allows_forward(p)) return FrameOutcome::dropped(Drop::ttl_expired);
  const packet::ServiceTable& services = s.config->services;
  std::uint32_t to_backend = packet::kNoCounterSlot;  // an error about a reply goes to its backend
  // The quoted datagram, seen as the request of its flow: client -> VIP:port (an error about a
  // reply the VIP sent) ...
  packet::ParsedPacket request = reversed_quote(p, e);
  packet::ServiceMatch m = services.match(request);
  if (m.kind == packet::MatchKind::to_service &&
      m.service->action == packet::ServiceAction::balance) {
    // It was sent to the VIP, the reply's source; it goes to the backend that serves the flow.
    if (p.dst_address != e.quoted_src) return FrameOutcome::dropped(Drop::icmp_unmatched);
    std::uint64_t seed = services.flow_hash_seed();
    std::uint16_t backend = flows.table && m.service->flow_affinity
                                ? flows.table->peek_backend(*m.service, request, seed, flows.now_ms)
                                : packet::choose_backend(*m.service, request, seed);
    if (m.service->encapsulates()) {
      // Direct server return: the backend sent the reply itself, from the VIP; the error goes to
      // it unchanged, inside the outer header of its requests.
      FrameOutcome o =
          encapsulate_to(frame, p, *m.service, backend, packet::L4Checksum::full, s, sinks, hop);
      if (o.fate != Fate::drop) sinks.counters.icmp_translated.add();
      return o;
    }
    if (backend >= m.service->backends.size()) return FrameOutcome::dropped(Drop::no_backend);
    const net::Endpoint& b = m.service->backends[backend];
    packet::translate_icmp_error(frame, p, e, packet::Side::source, b.address.bytes, b.port,
                                 packet::Side::destination, b.address.bytes);
    to_backend = m.service->counter_slot(backend);
  } else {
    // ... or backend -> client as a reply would be: an error about a request ferry sent to a
    // backend, on its way to the client that sent the request.
    m = services.match(reversed_quote(p, e));
    if (m.kind != packet::MatchKind::from_backend ||
        m.service->action != packet::ServiceAction::balance || p.dst_address != e.quoted_src) {
      return FrameOutcome::dropped(Drop::icmp_unmatched);
    }
    packet::translate_icmp_error(frame, p, e, packet::Side::destination, m.service->vip.bytes,
                                 m.service->port, packet::Side::source, m.service->vip.bytes);
  }
  NeighbourKey missed{};
  steps::MtuCheck no_check;  // an error is at most 576 / 1280 bytes
  steps::KernelNextHop next_hop{s, sinks, missed, no_check, frame};
  FrameOutcome o = steps::outcome(packet::route_via(frame, p, next_hop), missed);
  if (o.fate != Fate::drop) {
    sinks.counters.icmp_translated.add();
    sinks.to_backend(to_backend, p.l3_bytes);
  }
  return o;
}

}  // namespace ferry::fastpath
