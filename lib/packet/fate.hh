// A frame's fate in the one vocabulary every step uses from parse to transmit: the packet actions
// (balance, reflect, route) and their next-hop lookups, the fast-path worker's steps, its drop
// counters (ferry_xsk_drops_total{reason}). The packet layer never counts anything itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::packet {

enum class Fate : std::uint8_t {
  forward,  // send out of the egress port
  hold,     // rewritten and routed but for the destination MAC: hold until the next hop resolves
  drop,     // dropped, for the reason in `Drop`
  wait,     // a later fragment whose first has not come: the fragment table holds it
};

// Why a frame steered to the fast path is not sent.
enum class Drop : std::uint8_t {
  no_backend,           // a service of ours with no backend up
  neighbour_hold_full,  // no MAC for the next hop yet, and its hold queue (or the worker's) full
  tx_ring_full,         // the egress port's tx ring had no room
  malformed,            // headers the parser refused, or a descriptor outside the worker's slab
  ttl_expired,          // TTL / hop limit <= 1
  no_route,             // no kernel route out of an XDP port to the (rewritten) destination
  unexpected,          // steered to AF_XDP but no service or route of this worker's tables wants it
  no_tx_queue,         // the egress interface has no AF_XDP socket on this worker's queue
  neighbour_timeout,   // held for a next hop that stayed unresolved for HoldQueue::kTimeout
  fragment_duplicate,  // a fragment whose every byte was seen before
  fragment_overlap,    // a fragment overlapping others (the whole datagram is refused), or one
                       // of a datagram in more separate pieces than are tracked
  fragment_tiny,       // a first fragment too short for the UDP header (the datagram is refused)
  fragment_refused,    // a fragment of a datagram refused before (overlap, tiny, first dropped)
  fragment_hold_full,  // a fragment before its first, with the held frames or bytes at their bound
  fragment_timeout,    // a fragment whose first fragment did not come within the held timeout
  too_big,             // larger than the egress link's MTU with DF set (or IPv6): answered with
                       // fragmentation needed / packet too big unless rate-limited
  icmp_unmatched,      // an ICMP error quoting a datagram no service sent or received
  no_headroom,  // a request to encapsulate with less room before it in its UMEM frame than the
                // outer header needs (the kernel leaves 256 bytes: a bug if > 0)
};
inline constexpr std::size_t kDropCount = static_cast<std::size_t>(Drop::no_headroom) + 1;

std::string_view to_string(Fate f);
// Stable snake_case name, for metrics labels ("reason").
std::string_view to_string(Drop d);

// What an action or a next-hop lookup decided: forward or hold on `egress_port` (the caller's port
// id), or drop for `drop`. A lookup's hold means the egress port and source MAC are known but the
// next hop's MAC is not.
struct Verdict {
  Fate fate = Fate::drop;
  Drop drop = Drop::unexpected;  // drop: why; otherwise unexpected, never read
  std::uint32_t egress_port = 0;

  static constexpr Verdict forward(std::uint32_t port) {
    return {Fate::forward, Drop::unexpected, port};
  }
  static constexpr Verdict hold(std::uint32_t port) { return {Fate::hold, Drop::unexpected, port}; }
  static constexpr Verdict dropped(Drop why) { return {Fate::drop, why, 0}; }
  bool operator==(const Verdict&) const = default;
};

}  // namespace ferry::packet
