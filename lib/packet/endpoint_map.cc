// EndpointMap construction, off the hot path.
#include "lib/packet/endpoint_map.hh"

namespace ferry::packet {

void EndpointMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (!s.used) continue;
    std::size_t i = hash_words(s.address[0], s.address[1], s.rest) & mask_;
    while (slots_[i].used) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

bool EndpointMap::insert(const EndpointKey& key, EndpointTarget target) {
  if (find(key)) return false;
  if ((size_ + 1) * 4 > slots_.size()) grow();  // load factor <= 1/4 keeps probes short
  Slot slot;
  slot.address[0] = load_u64(key.address.data());
  slot.address[1] = load_u64(key.address.data() + 8);
  slot.rest = pack_rest(key.port, key.protocol, key.version);
  slot.used = true;
  slot.target = target;
  std::size_t i = hash_words(slot.address[0], slot.address[1], slot.rest) & mask_;
  while (slots_[i].used) i = (i + 1) & mask_;
  slots_[i] = slot;
  ++size_;
  return true;
}

}  // namespace ferry::packet
