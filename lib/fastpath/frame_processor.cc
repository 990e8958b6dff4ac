// The per-frame decision of the AF_XDP workers.
#include "lib/fastpath/frame_processor.hh"

#include "lib/packet/balance.hh"
#include "lib/packet/checksum.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/reflect.hh"
#include "lib/packet/route.hh"

namespace ferry::fastpath {
namespace {

using packet::DropReason;

// Next hop on `port` towards `next_hop`: the MAC from the neighbour table, or a miss (egress port
// and source MAC filled in, so route_via() can hold the frame) whose key goes to `missed` and, the
// first time, to the resolution queue.
DropReason resolve_on(const Snapshot& s, std::uint32_t port, packet::IpVersion version,
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
    return DropReason::neighbour_miss;
  }
  out.dst_mac = *mac;
  return DropReason::none;
}

Drop to_drop(DropReason r) {
  switch (r) {
    case DropReason::no_backend:
      return Drop::no_backend;
    case DropReason::ttl_expired:
      return Drop::ttl_expired;
    case DropReason::malformed:
      return Drop::malformed;
    case DropReason::no_route:
      return Drop::no_route;
    case DropReason::neighbour_miss:  // route_via() holds these: a drop with it is a bug
    case DropReason::none:
      break;
  }
  return Drop::unexpected;
}

FrameOutcome outcome(const packet::Verdict& v, const NeighbourKey& missed) {
  switch (v.kind) {
    case packet::VerdictKind::forward:
      return FrameOutcome::to(v.egress_port);
    case packet::VerdictKind::hold:
      return FrameOutcome::held(v.egress_port, missed);
    case packet::VerdictKind::drop:
      return FrameOutcome::dropped(to_drop(v.drop_reason));
    case packet::VerdictKind::pass_to_kernel:
      break;
  }
  // The XDP program only steers what the tables want; anything else here raced a reload (or
  // is a bug). AF_XDP cannot hand a frame back to the kernel, so it is counted and dropped.
  return FrameOutcome::dropped(Drop::unexpected);
}

// The action for a parsed UDP frame; `missed` gets the next hop a hold waits for.
FrameOutcome act(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
                 std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows) noexcept {
  NeighbourKey missed{};
  const ConfigTables& tables = *s.config;
  packet::ServiceMatch match = tables.services.match(p);
  if (match.kind == packet::MatchKind::to_service &&
      match.service->action == packet::ServiceAction::reflect) {
    return outcome(packet::reflect(frame, p, ingress_slot), missed);
  }
  if (match.kind != packet::MatchKind::none) {
    // Balanced traffic leaves by the kernel's route to the rewritten destination.
    auto any_port = [&](const packet::ParsedPacket& q, packet::NextHop& out) {
      const KernelRoute* r = s.next_hops->routes.lookup(q.dst_address, q.version);
      if (!r) return DropReason::no_route;
      const auto& next_hop = r->gateway ? r->gateway->bytes : q.dst_address;
      return resolve_on(s, r->port, q.version, next_hop, sinks, missed, out);
    };
    // Requests of a flow-affinity service go where their flow's entry says; replies never ask.
    auto choose = [&](const packet::Service& service, const packet::ParsedPacket& q) {
      std::uint64_t seed = tables.services.flow_hash_seed();
      if (flows.table && service.flow_affinity) {
        return flows.table->backend_for(service, q, seed, flows.now_ms);
      }
      return packet::choose_backend(service, q, seed);
    };
    packet::Verdict v = packet::balance(frame, p, tables.services, choose, any_port);
    return outcome(v, missed);
  }
  if (const packet::RouteEntry* route = tables.routes.lookup(p)) {
    // A configured route names the egress port; the kernel's routes on that port say whether the
    // destination is on the link or behind a gateway.
    auto via_port = [&](const packet::ParsedPacket& q, packet::NextHop& out) {
      const KernelRoute* r =
          s.next_hops->routes.lookup(q.dst_address, q.version, route->egress_port);
      const auto& next_hop = r && r->gateway ? r->gateway->bytes : q.dst_address;
      return resolve_on(s, route->egress_port, q.version, next_hop, sinks, missed, out);
    };
    packet::Verdict v = packet::route_via(frame, p, via_port);
    return outcome(v, missed);
  }
  return FrameOutcome::dropped(Drop::unexpected);
}

}  // namespace

FrameOutcome process_frame(packet::FrameBytes frame, const Snapshot& s, std::uint32_t ingress_slot,
                           FrameSinks sinks, FlowAffinity flows) noexcept {
  packet::ParsedPacket p;
  packet::ParseError err = packet::parse_frame(frame, p);
  if (err != packet::ParseError::none) {
    return FrameOutcome::dropped(packet::passes_to_kernel(err) ? Drop::unexpected
                                                               : Drop::malformed);
  }
  if (p.protocol != IPPROTO_UDP) return FrameOutcome::dropped(Drop::unexpected);
  // Decided on the frame as it came: the signature is the pseudo-header of the original addresses.
  packet::L4Checksum checksum = packet::classify_l4_checksum(frame, p);
  FrameOutcome o = act(frame, p, s, ingress_slot, sinks, flows);
  if (o.fate != Fate::drop && packet::needs_finishing(checksum)) {
    packet::finish_l4_checksum(frame, p);
    (checksum == packet::L4Checksum::partial ? sinks.counters.checksums_partial
                                             : sinks.counters.checksums_ipv6_zero)
        .add();
  }
  return o;
}

}  // namespace ferry::fastpath
