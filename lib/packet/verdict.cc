// Names of verdicts and drop reasons, as they appear in metrics labels.
#include "lib/packet/verdict.hh"

namespace ferry::packet {

std::string_view to_string(VerdictKind k) {
  switch (k) {
    case VerdictKind::forward:
      return "forward";
    case VerdictKind::drop:
      return "drop";
    case VerdictKind::pass_to_kernel:
      return "pass_to_kernel";
    case VerdictKind::hold:
      return "hold";
  }
  return "unknown";
}

std::string_view to_string(DropReason r) {
  switch (r) {
    case DropReason::none:
      return "none";
    case DropReason::no_backend:
      return "no_backend";
    case DropReason::ttl_expired:
      return "ttl_expired";
    case DropReason::malformed:
      return "malformed";
    case DropReason::neighbour_miss:
      return "neighbour_miss";
    case DropReason::no_route:
      return "no_route";
    case DropReason::too_big:
      return "too_big";
  }
  return "unknown";
}

}  // namespace ferry::packet
