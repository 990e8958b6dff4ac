// The route action.
#include "lib/packet/route.hh"

#include <cstring>

#include "lib/packet/rewrite.hh"

namespace ferry::packet {

Verdict route(FrameBytes frame, ParsedPacket& p, const NextHop& hop) noexcept {
  if (!frame_matches(frame, p)) return Verdict::dropped(Drop::malformed);
  // RFC 1812 5.3.1 / RFC 8200 3: a packet arriving with 1 (or 0) must not be forwarded.
  if (!hop_limit_allows_forward(p)) return Verdict::dropped(Drop::ttl_expired);
  decrement_hop_limit(frame, p);
  std::memcpy(frame.data(), hop.dst_mac.data(), hop.dst_mac.size());
  std::memcpy(frame.data() + 6, hop.src_mac.data(), hop.src_mac.size());
  return Verdict::forward(hop.egress_port);
}

}  // namespace ferry::packet
