// Maglev consistent hashing (Eisenbud et al., NSDI 2016): a lookup table of prime size filled
// from each backend's own permutation, so a backend leaving moves little more than its own flows.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ferry::packet {

// One backend the table may choose: `name` is its identity (its permutation is derived from it;
// ferry uses the endpoint text, e.g. "10.0.1.2:53"), `index` is what lookup() returns for it.
struct MaglevBackend {
  std::string_view name;
  std::uint16_t index = 0;
};

// Immutable once built; built off the hot path (O(size) memory, ~size*ln(size) steps at worst).
// Unweighted: every backend gets floor or ceil of size/N slots, since the fill takes one slot per
// backend per round. (Weights would be the round-robin skipping some backends on some rounds; the
// config has none.)
class MaglevTable {
 public:
  static constexpr std::uint32_t kDefaultSize = 65537;  // prime, >= 100x a realistic backend count
  static constexpr std::uint16_t kNoBackend = 0xffff;

  MaglevTable() = default;
  // `size` must be prime and >= backends.size(); at most 65535 backends; names unique. The order
  // of `backends` does not matter (they are filled in name order), so reordering a config's
  // backend list moves no flows. Throws std::invalid_argument otherwise.
  static MaglevTable build(std::span<const MaglevBackend> backends,
                           std::uint32_t size = kDefaultSize);

  // The backend index for a flow hash, or kNoBackend when the table has no backends.
  std::uint16_t lookup(std::uint64_t flow_hash) const {
    if (slots_.empty()) return kNoBackend;
    // Lemire's multiply-shift range reduction of the hash's high half instead of a division.
    auto slot = static_cast<std::uint32_t>(((flow_hash >> 32) * slots_.size()) >> 32);
    return slots_[slot];
  }
  bool empty() const { return slots_.empty(); }
  std::uint32_t backend_count() const { return backend_count_; }
  // The filled table, each slot a backend index (empty when there are no backends).
  std::span<const std::uint16_t> slots() const { return slots_; }

 private:
  std::vector<std::uint16_t> slots_;
  std::uint32_t backend_count_ = 0;
};

bool is_prime(std::uint32_t n);

}  // namespace ferry::packet
