// Maglev table population (NSDI 2016, section 3.4, "Pseudocode 1").
#include "lib/packet/maglev.hh"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "lib/packet/flow_hash.hh"

namespace ferry::packet {
namespace {

// Fixed seeds: a backend's permutation must depend on its name only, never on the flow-hash seed
// or on which other backends exist.
constexpr std::uint64_t kOffsetSeed = 0x6d61676c65763031ull;  // "maglev01"
constexpr std::uint64_t kSkipSeed = 0x6d61676c65763032ull;    // "maglev02"

std::uint64_t hash_name(std::string_view name, std::uint64_t seed) {
  return hash_bytes({reinterpret_cast<const std::uint8_t*>(name.data()), name.size()}, seed);
}

}  // namespace

bool is_prime(std::uint32_t n) {
  if (n < 2) return false;
  for (std::uint64_t d = 2; d * d <= n; ++d) {
    if (n % d == 0) return false;
  }
  return true;
}

std::vector<MaglevTable::Input> MaglevTable::inputs_of(std::span<const MaglevBackend> backends,
                                                       std::uint32_t size) {
  if (!is_prime(size)) {
    throw std::invalid_argument("maglev table size " + std::to_string(size) + " is not prime");
  }
  if (backends.size() >= kNoBackend) {
    throw std::invalid_argument("maglev: at most 65534 backends per service");
  }
  if (backends.size() > size) {
    throw std::invalid_argument("maglev table size " + std::to_string(size) +
                                " is smaller than the backend count " +
                                std::to_string(backends.size()));
  }
  std::vector<Input> ordered;
  for (const MaglevBackend& b : backends) {
    if (b.weight > 0) ordered.push_back({std::string(b.name), b.index, b.weight});
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const Input& a, const Input& b) { return a.name < b.name; });
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    if (ordered[i].index == kNoBackend) {
      throw std::invalid_argument("maglev: backend index 65535 is reserved for \"no backend\"");
    }
    if (i > 0 && ordered[i].name == ordered[i - 1].name) {
      throw std::invalid_argument("maglev: backend " + ordered[i].name + " listed twice");
    }
  }
  return ordered;
}

MaglevTable MaglevTable::build(std::span<const MaglevBackend> backends, std::uint32_t size) {
  return fill(inputs_of(backends, size), size);
}

void MaglevTable::check(std::span<const MaglevBackend> backends, std::uint32_t size) {
  inputs_of(backends, size);
}

MaglevTable MaglevTable::build(std::span<const MaglevBackend> backends, std::uint32_t size,
                               const MaglevTable& previous) {
  std::vector<Input> inputs = inputs_of(backends, size);
  if (previous.built_ && previous.built_->size == size && previous.built_->inputs == inputs) {
    return previous;
  }
  return fill(std::move(inputs), size);
}

MaglevTable MaglevTable::fill(std::vector<Input> ordered, std::uint32_t size) {
  auto built = std::make_shared<Built>();
  built->size = size;
  if (!ordered.empty()) {
    // Backend i prefers slots offset, offset+skip, offset+2*skip, ... (mod size); with size
    // prime and 1 <= skip < size that sequence visits every slot, so the fill always terminates.
    std::size_t n = ordered.size();
    std::vector<std::uint32_t> next(n), skip(n);
    std::uint32_t max_weight = 0;
    for (std::size_t i = 0; i < n; ++i) {
      next[i] = static_cast<std::uint32_t>(hash_name(ordered[i].name, kOffsetSeed) % size);
      skip[i] = static_cast<std::uint32_t>(hash_name(ordered[i].name, kSkipSeed) % (size - 1) + 1);
      max_weight = std::max(max_weight, ordered[i].weight);
    }
    // A backend takes its turn in a round once its credit reaches max_weight (see maglev.hh);
    // with equal weights every backend takes every round, the unweighted fill.
    std::vector<std::uint64_t> credit(n, 0);
    std::vector<std::uint16_t>& slots = built->slots;
    slots.assign(size, kNoBackend);
    std::uint32_t filled = 0;
    while (filled < size) {
      for (std::size_t i = 0; i < n && filled < size; ++i) {
        credit[i] += ordered[i].weight;
        if (credit[i] < max_weight) continue;
        credit[i] -= max_weight;
        std::uint32_t c = next[i];
        while (slots[c] != kNoBackend) {
          c += skip[i];
          if (c >= size) c -= size;
        }
        slots[c] = ordered[i].index;
        c += skip[i];
        if (c >= size) c -= size;
        next[i] = c;
        ++filled;
      }
    }
  }
  built->inputs = std::move(ordered);
  MaglevTable table;
  table.slots_ = built->slots.data();
  table.size_ = static_cast<std::uint32_t>(built->slots.size());
  table.built_ = std::move(built);
  return table;
}

}  // namespace ferry::packet
