// Building the workers' (port, IP) -> MAC table.
#include "lib/fastpath/neighbour_table.hh"

#include <bit>

namespace ferry::fastpath {

NeighbourTable::NeighbourTable(std::span<const Neighbour> neighbours) {
  if (neighbours.empty()) return;
  std::size_t capacity = std::bit_ceil(neighbours.size() * 4);
  slots_.resize(capacity);
  mask_ = capacity - 1;
  for (const Neighbour& n : neighbours) {
    std::uint64_t a0 = packet::load_u64(n.key.address.data());
    std::uint64_t a1 = packet::load_u64(n.key.address.data() + 8);
    std::uint32_t tag = pack_tag(n.key.port, n.key.version);
    for (std::size_t i = hash(a0, a1, tag) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.used) {
        if (s.address[0] == a0 && s.address[1] == a1 && s.tag == tag) break;  // duplicate
        continue;
      }
      s = Slot{{a0, a1}, tag, true, n.mac};
      ++size_;
      break;
    }
  }
}

}  // namespace ferry::fastpath
