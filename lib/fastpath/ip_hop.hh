// The frames that make ferry an IP hop rather than a datagram rewriter: fragments of UDP
// datagrams (each one translated as its datagram, through the worker's fragment table) and ICMP
// errors about balanced datagrams (translated both ways, as a NAT translates them). Called by
// process_frame() for the frames parse_frame() refuses; internal to lib/fastpath.
#pragma once

#include "lib/fastpath/frame_processor.hh"
#include "lib/packet/parse.hh"

namespace ferry::fastpath {

// A frame parse_frame() refused as a fragment that may be a UDP one (IPv4, or IPv6 with a
// fragment header right after the fixed one).
inline bool is_udp_fragment(packet::ParseError err, const packet::ParsedPacket& p) {
  return err == packet::ParseError::ipv4_fragment ||
         (err == packet::ParseError::ipv6_extension_header && p.protocol == 44);
}
// A frame parse_frame() refused for its protocol, which is ICMP (IPv4) or ICMPv6 (IPv6).
inline bool is_icmp(packet::ParseError err, const packet::ParsedPacket& p) {
  return err == packet::ParseError::unsupported_protocol &&
         (p.is_v4() ? p.protocol == IPPROTO_ICMP : p.protocol == IPPROTO_ICMPV6);
}

// The first fragment is acted on as its datagram (its UDP header decides) and records the
// decision; the later ones get the same addresses and follow, or wait for it (Fate::wait).
// Duplicates, overlaps and fragments of refused datagrams are dropped.
FrameOutcome process_fragment(packet::FrameBytes frame, packet::ParsedPacket& p, const Snapshot& s,
                              std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows,
                              const IpHop& hop) noexcept;

// A later fragment the fragment table held for slot `datagram`, once its first fragment decided
// (or had the datagram refused): it follows the decision (into the first fragment's tunnel for an
// encapsulating service: `hop.headroom` is the held frame's own).
FrameOutcome follow_held(packet::FrameBytes frame, const Snapshot& s, FrameSinks sinks,
                         const FragmentTable& fragments, std::uint32_t datagram,
                         const IpHop& hop) noexcept;

// An error about a reply a VIP sent goes to the backend that serves the quoted flow (the flow
// table's entry, else Maglev's choice), quoting the reply as that backend sent it; an error about
// a request ferry sent to a backend goes to the client, from the VIP, quoting the request as the
// client sent it. An encapsulating service's backend sent its replies to the client itself: an
// error about one goes to it unchanged, encapsulated as its requests are (`hop.headroom`). Anything
// else is icmp_unmatched.
FrameOutcome process_icmp_error(packet::FrameBytes frame, packet::ParsedPacket& p, const IpHop& hop,
                                const Snapshot& s, FrameSinks sinks, FlowAffinity flows) noexcept;

}  // namespace ferry::fastpath
