// What an action decided for a frame: send it out of a port, hold it until its next hop's MAC is
// known, drop it (and why), or hand it to the kernel. Workers count verdicts per reason; the packet
// layer never counts anything itself.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry::packet {

enum class VerdictKind : std::uint8_t {
  forward,
  drop,
  pass_to_kernel,
  // Rewritten and routed (hop limit, source MAC) but the next hop has no MAC yet: the caller keeps
  // the frame, writes the destination MAC once it is known and sends it out of egress_port.
  hold,
};

enum class DropReason : std::uint8_t {
  none = 0,
  no_backend,   // the service has no backend up
  ttl_expired,  // IPv4 TTL or IPv6 hop limit <= 1 on arrival
  malformed,    // parse failed (the ParseError says how) or the frame is not what the action needs
  neighbour_miss,  // the caller's neighbour lookup has no MAC yet: route_via() holds the frame
  no_route,        // decided by the caller's route lookup
  too_big,         // the caller's next hop: larger than the egress MTU and may not be fragmented
};
inline constexpr std::size_t kDropReasonCount = static_cast<std::size_t>(DropReason::too_big) + 1;

std::string_view to_string(VerdictKind k);
// Stable snake_case name, for metrics labels ("reason").
std::string_view to_string(DropReason r);

struct Verdict {
  VerdictKind kind = VerdictKind::drop;
  DropReason drop_reason = DropReason::none;
  // forward, hold: the caller's egress port id (its index into the worker's ports); else 0.
  std::uint32_t egress_port = 0;

  static constexpr Verdict forward(std::uint32_t port) {
    return {VerdictKind::forward, DropReason::none, port};
  }
  static constexpr Verdict hold(std::uint32_t port) {
    return {VerdictKind::hold, DropReason::none, port};
  }
  static constexpr Verdict drop(DropReason why) { return {VerdictKind::drop, why, 0}; }
  static constexpr Verdict pass_to_kernel() {
    return {VerdictKind::pass_to_kernel, DropReason::none, 0};
  }
  bool operator==(const Verdict&) const = default;
};

}  // namespace ferry::packet
