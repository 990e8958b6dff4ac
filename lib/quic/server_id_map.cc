// ServerIdMap: linear probing in a power-of-two table at most half full.
#include "lib/quic/server_id_map.hh"

#include <cstring>
#include <stdexcept>

namespace ferry::quic {
namespace {

struct Key {
  std::uint64_t low;
  std::uint64_t high;
};

Key make_key(const std::uint8_t* id, std::size_t length) {
  std::uint8_t packed[16] = {};
  packed[0] = static_cast<std::uint8_t>(length);
  std::memcpy(packed + 1, id, length);
  Key k;
  std::memcpy(&k.low, packed, 8);
  std::memcpy(&k.high, packed + 8, 8);
  return k;
}

std::size_t hash(Key k) {
  std::uint64_t h = k.low * 0x9e3779b97f4a7c15ull ^ (k.high + 0x632be59bd9b4e019ull);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<std::size_t>(h);
}

}  // namespace

ServerIdEntry ServerIdEntry::make(std::span<const std::uint8_t> id, std::uint32_t backend) {
  if (id.empty() || id.size() > kMaxServerIdBytes) {
    throw std::invalid_argument("a server ID is 1..15 octets");
  }
  ServerIdEntry e;
  std::memcpy(e.bytes.data(), id.data(), id.size());
  e.length = static_cast<std::uint8_t>(id.size());
  e.backend = backend;
  return e;
}

ServerIdMap::ServerIdMap(std::span<const ServerIdEntry> entries) {
  std::size_t capacity = 8;
  while (capacity < 2 * entries.size()) capacity *= 2;
  slots_.resize(capacity);
  mask_ = capacity - 1;
  for (const auto& e : entries) {
    if (e.length == 0 || e.length > kMaxServerIdBytes) {
      throw std::invalid_argument("a server ID is 1..15 octets");
    }
    Key k = make_key(e.bytes.data(), e.length);
    for (std::size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key_low == 0 && s.key_high == 0) {
        s = Slot{k.low, k.high, e.backend};
        ++size_;
        break;
      }
      if (s.key_low == k.low && s.key_high == k.high) {
        throw std::invalid_argument("duplicate server ID");
      }
    }
  }
}

std::uint32_t ServerIdMap::find(const std::uint8_t* id, std::size_t length) const noexcept {
  if (slots_.empty() || length == 0 || length > kMaxServerIdBytes) return kNotFound;
  Key k = make_key(id, length);
  for (std::size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.key_low == k.low && s.key_high == k.high) return s.backend;
    if (s.key_low == 0 && s.key_high == 0) return kNotFound;
  }
}

}  // namespace ferry::quic
