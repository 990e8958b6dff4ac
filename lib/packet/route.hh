// The route action: forward a parsed IPv4/IPv6 packet one L3 hop (hop limit, checksum, MACs).
// Which next hop is the caller's business (route table + kernel neighbour table).
#pragma once

#include <cstdint>
#include <utility>

#include "lib/packet/bytes.hh"
#include "lib/packet/fate.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

// Where a forwarded frame goes: the caller's route and neighbour lookup, resolved.
struct NextHop {
  std::uint32_t egress_port = 0;  // the caller's port id, echoed in the verdict
  MacAddress src_mac{};           // the egress interface's own MAC
  MacAddress dst_mac{};           // the next hop's MAC, from the neighbour table
};

// TTL / hop limit <= 1: drop ttl_expired, frame untouched. Otherwise decrement it (IPv4: header
// checksum updated incrementally), set Ethernet dst = hop.dst_mac, src = hop.src_mac, and forward
// to hop.egress_port. VLAN tags are left as they are.
Verdict route(FrameBytes frame, ParsedPacket& p, const NextHop& hop) noexcept;

// True when the packet may be forwarded one more hop.
inline bool hop_limit_allows_forward(const ParsedPacket& p) {
  return p.hop_limit > 1;
}

// route() with the next hop found by the caller's `resolve`, called as
// `Verdict resolve(const ParsedPacket& p, NextHop& out)` for p's destination: forward with `out`
// filled in; hold when the egress port and source MAC are known (in `out`) but the next hop's MAC
// is not: the frame is routed all the same (destination MAC left zero) and the verdict is hold, so
// the caller can send it once the MAC is published; drop (no_route, too_big) drops the frame
// for that reason. A template so the lookup inlines into the worker loop: no virtual call or
// std::function per packet.
template <typename ResolveNextHop>
Verdict route_via(FrameBytes frame, ParsedPacket& p, ResolveNextHop&& resolve) noexcept {
  if (!hop_limit_allows_forward(p)) return Verdict::dropped(Drop::ttl_expired);
  NextHop hop;
  Verdict next = std::forward<ResolveNextHop>(resolve)(std::as_const(p), hop);
  if (next.fate == Fate::drop) return next;
  if (next.fate == Fate::hold) hop.dst_mac = {};
  Verdict v = route(frame, p, hop);
  return v.fate == Fate::forward && next.fate == Fate::hold ? Verdict::hold(v.egress_port) : v;
}

}  // namespace ferry::packet
