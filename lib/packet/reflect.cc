// The reflect action.
#include "lib/packet/reflect.hh"

#include <algorithm>
#include <utility>

#include "lib/packet/rewrite.hh"

namespace ferry::packet {

Verdict reflect(FrameBytes frame, ParsedPacket& p, std::uint32_t ingress_port) noexcept {
  if (!frame_matches(frame, p)) return Verdict::dropped(Drop::malformed);
  std::uint8_t* f = frame.data();
  std::swap_ranges(f, f + 6, f + 6);
  std::swap_ranges(f + p.src_address_offset(), f + p.src_address_offset() + p.address_bytes(),
                   f + p.dst_address_offset());
  std::swap(p.src_address, p.dst_address);
  if (p.fragment_tail) return Verdict::forward(ingress_port);  // no ports: its first has them
  std::swap_ranges(f + p.l4_offset, f + p.l4_offset + 2, f + p.l4_offset + 2);
  std::swap(p.src_port, p.dst_port);
  return Verdict::forward(ingress_port);
}

}  // namespace ferry::packet
