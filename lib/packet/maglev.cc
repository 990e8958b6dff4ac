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

MaglevTable MaglevTable::build(std::span<const MaglevBackend> backends, std::uint32_t size) {
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
  std::vector<MaglevBackend> ordered;
  for (const MaglevBackend& b : backends) {
    if (b.weight > 0) ordered.push_back(b);
  }
  MaglevTable table;
  table.backend_count_ = static_cast<std::uint32_t>(ordered.size());
  if (ordered.empty()) return table;

  std::sort(ordered.begin(), ordered.end(),
            [](const MaglevBackend& a, const MaglevBackend& b) { return a.name < b.name; });
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    if (ordered[i].index == kNoBackend) {
      throw std::invalid_argument("maglev: backend index 65535 is reserved for \"no backend\"");
    }
    if (i > 0 && ordered[i].name == ordered[i - 1].name) {
      throw std::invalid_argument("maglev: backend " + std::string(ordered[i].name) +
                                  " listed twice");
    }
  }

  // Backend i prefers slots offset, offset+skip, offset+2*skip, ... (mod size); with size prime
  // and 1 <= skip < size that sequence visits every slot, so the fill always terminates.
  std::size_t n = ordered.size();
  std::vector<std::uint32_t> next(n), skip(n);
  std::uint32_t max_weight = 0;
  for (std::size_t i = 0; i < n; ++i) {
    next[i] = static_cast<std::uint32_t>(hash_name(ordered[i].name, kOffsetSeed) % size);
    skip[i] = static_cast<std::uint32_t>(hash_name(ordered[i].name, kSkipSeed) % (size - 1) + 1);
    max_weight = std::max(max_weight, ordered[i].weight);
  }
  // A backend takes its turn in a round once its credit reaches max_weight (see maglev.hh); with
  // equal weights every backend takes every round, the unweighted fill.
  std::vector<std::uint64_t> credit(n, 0);
  table.slots_.assign(size, kNoBackend);
  std::uint32_t filled = 0;
  while (true) {
    for (std::size_t i = 0; i < n; ++i) {
      credit[i] += ordered[i].weight;
      if (credit[i] < max_weight) continue;
      credit[i] -= max_weight;
      std::uint32_t c = next[i];
      while (table.slots_[c] != kNoBackend) {
        c += skip[i];
        if (c >= size) c -= size;
      }
      table.slots_[c] = ordered[i].index;
      c += skip[i];
      if (c >= size) c -= size;
      next[i] = c;
      if (++filled == size) return table;
    }
  }
}

}  // namespace ferry::packet
