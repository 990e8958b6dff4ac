// Maglev consistent hashing (Eisenbud et al., NSDI 2016): a lookup table of prime size filled
// from each backend's own permutation, so a backend leaving moves little more than its own flows.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

// Immutable once built, and shared by its copies (a copy is two pointers); built off the hot path
// (O(size) memory, ~size*ln(size) steps at worst, plus at most size*min(N, max weight) turns
// skipped by light backends). Weights as Katran's MaglevHashV2 does them: in each round of the fill
// a backend adds its weight to a credit and takes a slot only when the credit reaches the largest
// weight, which it then pays. The heaviest backends take a slot every round, one of weight w on w
// of every max-weight rounds, so each backend's slot count is size*w/W within N+1 slots (N
// backends; only the last, partial round and the credits' rounding differ). When every weight is
// equal every backend takes a slot every round, which is the unweighted table exactly: equal
// weights of any value give the same table as weight 1. Measured (maglev_test): a weight change
// moves within 0.2 points of the least possible share of slots (one of 3 backends 1 -> 2: 16.67%,
// the minimum being 1/6).
class MaglevTable {
 public:
  static constexpr std::uint32_t kDefaultSize = 65537;  // prime, >= 100x a realistic backend count
  static constexpr std::uint16_t kNoBackend = 0xffff;

  MaglevTable() = default;
  MaglevTable(const MaglevTable&) = default;
  MaglevTable& operator=(const MaglevTable&) = default;
  MaglevTable(MaglevTable&& other) noexcept
      : built_(std::move(other.built_)),
        slots_(std::exchange(other.slots_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  MaglevTable& operator=(MaglevTable&& other) noexcept {
    built_ = std::move(other.built_);
    slots_ = std::exchange(other.slots_, nullptr);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  // `size` must be prime and >= backends.size(); at most 65535 backends; names unique. The order
  // of `backends` does not matter (they are filled in name order), so reordering a config's
  // backend list moves no flows. Backends of weight 0 are left out; with no weight above 0 the
  // table is empty. Throws std::invalid_argument otherwise.
  static MaglevTable build(std::span<const MaglevBackend> backends,
                           std::uint32_t size = kDefaultSize);
  // The same, but `previous` itself (shared, not filled again) when it was built from the same
  // backends (names, indexes, weights) and size: a reload, a backend command or a health change
  // rebuilds only the tables of the services it changed.
  static MaglevTable build(std::span<const MaglevBackend> backends, std::uint32_t size,
                           const MaglevTable& previous);
  // Throws what build() would, without filling a table (a reload's check of a config).
  static void check(std::span<const MaglevBackend> backends, std::uint32_t size = kDefaultSize);

  // The backend index for a flow hash, or kNoBackend when the table has no backends.
  std::uint16_t lookup(std::uint64_t flow_hash) const {
    if (size_ == 0) return kNoBackend;
    // Lemire's multiply-shift range reduction of the hash's high half instead of a division.
    auto slot = static_cast<std::uint32_t>(((flow_hash >> 32) * size_) >> 32);
    return slots_[slot];
  }
  bool empty() const { return size_ == 0; }
  // Backends in the table: those of weight above 0.
  std::uint32_t backend_count() const {
    return built_ ? static_cast<std::uint32_t>(built_->inputs.size()) : 0;
  }
  // The filled table, each slot a backend index (empty when there are no backends).
  std::span<const std::uint16_t> slots() const { return {slots_, size_}; }
  // Whether `other` shares this table's slots (was taken over by build(..., previous)).
  bool shares_slots_with(const MaglevTable& other) const { return built_ == other.built_; }

 private:
  struct Input {  // a backend as the table was filled from it (weight above 0, in name order)
    std::string name;
    std::uint16_t index = 0;
    std::uint32_t weight = 0;
    bool operator==(const Input&) const = default;
  };
  struct Built {
    std::vector<std::uint16_t> slots;
    std::vector<Input> inputs;
    std::uint32_t size = 0;  // the size asked for (slots is empty without backends)
  };
  static std::vector<Input> inputs_of(std::span<const MaglevBackend> backends, std::uint32_t size);
  static MaglevTable fill(std::vector<Input> inputs, std::uint32_t size);

  std::shared_ptr<const Built> built_;
  const std::uint16_t* slots_ = nullptr;  // built_->slots, read per packet without a second load
  std::uint32_t size_ = 0;
};

bool is_prime(std::uint32_t n);

}  // namespace ferry::packet
