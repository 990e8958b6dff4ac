// The steps process_frame() is made of, shared by its ordinary path (frame_processor.cc) and the
// IP-hop one (ip_hop.cc): the action on a parsed UDP datagram, the next hop on a port, and the
// send of an error the gateway built. Internal to lib/fastpath.
#pragma once

#include <array>
#include <cstdint>

#include "lib/fastpath/frame_processor.hh"
#include "lib/packet/checksum.hh"
#include "lib/packet/icmp.hh"
#include "lib/packet/route.hh"
#include "lib/packet/route_table.hh"

namespace ferry::fastpath::steps {

// The next hop on `port` towards `next_hop`: forward with the MAC from the neighbour table, or hold
// on a miss (egress port and source MAC filled in), whose key goes to `missed` and, the first time,
// to the resolution queue.
packet::Verdict resolve_on(const Snapshot& s, std::uint32_t port, packet::IpVersion version,
                           const std::array<std::uint8_t, 16>& next_hop, FrameSinks sinks,
                           NeighbourKey& missed, packet::NextHop& out) noexcept;

// An action's verdict as the worker's outcome; a hold waits for `missed`.
inline FrameOutcome outcome(const packet::Verdict& v, const NeighbourKey& missed) noexcept {
  return {v.fate, v.egress_port, v.drop, v.fate == Fate::hold ? missed : NeighbourKey{}};
}

// The egress MTU check of one datagram, when it is larger than the smallest MTU of the ports.
struct MtuCheck {
  const PortFacts* ports = nullptr;
  bool active = false;
  std::uint32_t too_big_mtu = 0;   // set when it does not fit and may not be fragmented
  std::uint32_t fragment_mtu = 0;  // set when it does not fit and is IPv4 without DF
  bool fits(packet::ConstFrameBytes frame, const packet::ParsedPacket& q,
            std::uint32_t port) noexcept;
  // Active only for a datagram larger than the smallest MTU of the ports: only it pays for it.
  static MtuCheck of(const Snapshot& s, const packet::ParsedPacket& p) noexcept {
    return {s.ports.get(), s.ports && s.ports->min_mtu != 0 && p.l3_bytes > s.ports->min_mtu};
  }
};

// route_via()'s next hop for balanced traffic: the kernel's best route out of any port.
struct KernelNextHop {
  const Snapshot& s;
  FrameSinks sinks;
  NeighbourKey& missed;
  MtuCheck& mtu;
  packet::ConstFrameBytes frame;
  packet::Verdict operator()(const packet::ParsedPacket& q, packet::NextHop& out);
};

// route_via()'s next hop for a configured route: its port, the kernel's gateway on it if any.
struct ConfiguredNextHop {
  const Snapshot& s;
  const packet::RouteEntry& route;
  FrameSinks sinks;
  NeighbourKey& missed;
  MtuCheck& mtu;
  packet::ConstFrameBytes frame;
  packet::Verdict operator()(const packet::ParsedPacket& q, packet::NextHop& out);
};

// The one match of a frame: the XDP program's `hint`, checked, or the table's own lookup (counted
// as matched_without_hint when the frame belongs to a service).
packet::ServiceMatch match_frame(const ConfigTables& tables, const packet::ParsedPacket& p,
                                 const packet::MatchHint& hint, FrameSinks sinks) noexcept;

// The backend of a request: where its QUIC-LB connection ID says, if it names a backend that may
// take it; then where its flow's entry says (flow affinity); then Maglev's choice.
struct RequestChooser {
  packet::ConstFrameBytes frame;
  const ConfigTables& tables;
  FrameSinks sinks;
  FlowAffinity flows;
  std::uint16_t operator()(const packet::Service& service,
                           const packet::ParsedPacket& q) const noexcept;
};

// What act() did to a datagram it forwards: the translation a first fragment records for the
// rest of its datagram, and what a too-big answer must undo.
struct Acted {
  FrameOutcome outcome;
  std::uint32_t too_big_mtu = 0;  // outcome drop too_big: the egress MTU
  // Balanced and sent (or held): the backend's per-backend counter slot it counted into.
  std::uint32_t counter_slot = packet::kNoCounterSlot;
};

// The action for a parsed UDP datagram (or first fragment): reflect, balance or route, with the
// egress MTU checked (too big with DF / IPv6: a too_big drop with the datagram as it arrived,
// endpoints restored; IPv4 without DF: outcome.fragment_mtu). A balanced one sent on counts as
// sent to its backend (a request) or from it (a reply). `finished_checksums`: the caller
// finishes partial checksums later (fragments never need it).
// `hint`: the XDP program's match of the frame, if any (ServiceTable::match(p, hint)).
Acted act(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
          std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows,
          const packet::MatchHint& hint = {}) noexcept;
// ... for a frame matched already (match_frame()).
Acted act(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
          std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows,
          const packet::ServiceMatch& match) noexcept;

// Routes a packet the gateway built (an ICMP error, p parsed for it) towards p's destination by
// the kernel's routes: MACs written, TTL untouched (the gateway is its source).
FrameOutcome send_generated(packet::FrameBytes frame, const packet::ParsedPacket& p,
                            const Snapshot& s, FrameSinks sinks) noexcept;
// ... along kernel route `r` to p's destination, looked up already by the caller.
FrameOutcome send_along(packet::FrameBytes frame, const packet::ParsedPacket& p,
                        const KernelRoute& r, const Snapshot& s, FrameSinks sinks) noexcept;

// Finishes the UDP/TCP checksum of a frame that arrived with a `checksum` needing it
// (packet::needs_finishing: partial, or UDP over IPv6 with 0), p in step with the frame, and
// counts it.
inline void finish_checksum(packet::FrameBytes frame, const packet::ParsedPacket& p,
                            packet::L4Checksum checksum, WorkerCounters& counters) noexcept {
  if (!packet::needs_finishing(checksum)) return;
  packet::finish_l4_checksum(frame, p);
  (checksum == packet::L4Checksum::partial ? counters.checksums_partial
                                           : counters.checksums_ipv6_zero)
      .add();
}

// Turns the datagram in `frame` (parsed as p, as it arrived) into the ICMP error `reason` from
// the gateway to its sender and routes it; rate-limited. When no error can be sent (or may be:
// none about a fragment but the first, nor about an ICMP error) the datagram is dropped as `why`;
// either way `why` is counted as the datagram's drop.
FrameOutcome answer_with_error(packet::FrameBytes frame, packet::ParsedPacket& p,
                               const packet::IcmpReason& reason, Drop why, const Snapshot& s,
                               FrameSinks sinks, const IpHop& hop) noexcept;

packet::IcmpReason time_exceeded(packet::IpVersion v);
packet::IcmpReason too_big(packet::IpVersion v, std::uint32_t mtu);

// A datagram act() dropped: a time exceeded or a too-big error for it when it expired here or
// does not fit, otherwise the drop itself.
FrameOutcome answer_drop(packet::FrameBytes frame, packet::ParsedPacket& p, const Acted& a,
                         const Snapshot& s, FrameSinks sinks, const IpHop& hop) noexcept;

}  // namespace ferry::fastpath::steps
