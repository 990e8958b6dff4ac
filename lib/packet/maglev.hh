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
// A backend of weight w gets w/W of the slots (W: the sum of the weights); weight 0 gets none.
struct MaglevBackend {
  std::string_view name;
  std::uint16_t index = 0;
  std::uint32_t weight = 1;
};

// Immutable once built; built off the hot path (O(size) memory, ~size*ln(size) steps at worst,
// plus at most size*min(N, max weight) turns skipped by light backends).
// Weights as Katran's MaglevHashV2 does them: in each round of the fill a backend adds its weight
// to a credit and takes a slot only when the credit reaches the largest weight, which it then
// pays. The heaviest backends take a slot every round, one of weight w on w of every max-weight
// rounds, so each backend's slot count is size*w/W within N+1 slots (N backends; only the last,
// partial round and the credits' rounding differ). When every weight is equal every backend takes
// a slot every round, which is the unweighted table exactly: equal weights of any value give the
// same table as weight 1. Measured (maglev_test): a weight change moves within 0.2 points of the
// least possible share of slots (one of 3 backends 1 -> 2: 16.67%, the minimum being 1/6).
class MaglevTable {
 public:
  static constexpr std::uint32_t kDefaultSize = 65537;  // prime, >= 100x a realistic backend count
  static constexpr std::uint16_t kNoBackend = 0xffff;

  MaglevTable() = default;
  // `size` must be prime and >= backends.size(); at most 65535 backends; names unique. The order
  // of `backends` does not matter (they are filled in name order), so reordering a config's
  // backend list moves no flows. Backends of weight 0 are left out; with no weight above 0 the
  // table is empty. Throws std::invalid_argument otherwise.
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
  // Backends in the table: those of weight above 0.
  std::uint32_t backend_count() const { return backend_count_; }
  // The filled table, each slot a backend index (empty when there are no backends).
  std::span<const std::uint16_t> slots() const { return slots_; }

 private:
  std::vector<std::uint16_t> slots_;
  std::uint32_t backend_count_ = 0;
};

bool is_prime(std::uint32_t n);

}  // namespace ferry::packet
