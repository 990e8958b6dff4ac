// Names of fates and drop reasons, as they appear in metrics labels and logs.
#include "lib/packet/fate.hh"

namespace ferry::packet {

std::string_view to_string(Fate f) {
  switch (f) {
    case Fate::forward:
      return "forward";
    case Fate::hold:
      return "hold";
    case Fate::drop:
      return "drop";
    case Fate::wait:
      return "wait";
  }
  return "unknown";
}

std::string_view to_string(Drop d) {
  switch (d) {
    case Drop::no_backend:
      return "no_backend";
    case Drop::neighbour_hold_full:
      return "neighbour_hold_full";
    case Drop::neighbour_timeout:
      return "neighbour_timeout";
    case Drop::tx_ring_full:
      return "tx_ring_full";
    case Drop::malformed:
      return "malformed";
    case Drop::ttl_expired:
      return "ttl_expired";
    case Drop::no_route:
      return "no_route";
    case Drop::unexpected:
      return "unexpected";
    case Drop::no_tx_queue:
      return "no_tx_queue";
    case Drop::fragment_duplicate:
      return "fragment_duplicate";
    case Drop::fragment_overlap:
      return "fragment_overlap";
    case Drop::fragment_tiny:
      return "fragment_tiny";
    case Drop::fragment_refused:
      return "fragment_refused";
    case Drop::fragment_hold_full:
      return "fragment_hold_full";
    case Drop::fragment_timeout:
      return "fragment_timeout";
    case Drop::too_big:
      return "too_big";
    case Drop::icmp_unmatched:
      return "icmp_unmatched";
    case Drop::no_headroom:
      return "no_headroom";
  }
  return "unknown";
}

}  // namespace ferry::packet
