// Backend choice for new proxied connections (see backend_pool.hh).
#include "lib/proxy/backend_pool.hh"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>

#include "lib/packet/flow_hash.hh"

namespace ferry::proxy {

std::uint64_t client_hash(const net::IpAddress& client) {
  using namespace packet::detail;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::memcpy(&lo, client.bytes.data(), 8);
  std::memcpy(&hi, client.bytes.data() + 8, 8);
  const std::uint64_t h = mum(lo ^ packet::kDefaultFlowHashSeed ^ kP0, hi ^ kP1);
  return mum(h ^ static_cast<std::uint64_t>(client.family) ^ kP2, kP3);
}

BackendPool::BackendPool(std::vector<Backend> backends, config::BalancePolicy policy,
                         const BackendPool* previous)
    : backends_(std::move(backends)), policy_(policy) {
  if (backends_.empty() || backends_.size() > 65535) {
    throw std::invalid_argument("a proxy service needs 1..65535 backends");
  }
  if (policy_ == config::BalancePolicy::maglev) {
    std::vector<packet::MaglevBackend> entries;
    for (std::size_t i = 0; i < backends_.size(); ++i) {
      entries.push_back({backends_[i].name, static_cast<std::uint16_t>(i), backends_[i].weight});
    }
    table_ =
        packet::MaglevTable::build(entries, packet::MaglevTable::kDefaultSize,
                                   previous != nullptr ? previous->table_ : packet::MaglevTable{});
  }
  if (policy_ == config::BalancePolicy::round_robin) {
    std::vector<std::uint32_t> weights;
    for (const Backend& b : backends_) weights.push_back(b.weight);
    round_robin_ = smooth_weighted_sequence(weights);
  }
}

std::vector<std::uint16_t> smooth_weighted_sequence(std::span<const std::uint32_t> weights) {
  std::uint32_t divisor = 0;
  for (std::uint32_t w : weights) divisor = std::gcd(divisor, w);
  if (divisor == 0) return {};
  // Backends of one weight differ in current weight only by the total per pick each has taken,
  // so among them the one picked fewest times (first in order on a tie) leads, and they take
  // their turns in order: each turn compares one leader per distinct weight, not every backend.
  struct SameWeight {
    std::int64_t weight = 0;
    std::vector<std::uint16_t> members;  // in order
    std::int64_t picks = 0;
  };
  std::map<std::uint32_t, SameWeight> by_weight;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0) continue;
    SameWeight& g = by_weight[weights[i] / divisor];
    g.weight = weights[i] / divisor;
    g.members.push_back(static_cast<std::uint16_t>(i));
    total += g.weight;
  }
  std::vector<std::uint16_t> sequence;
  sequence.reserve(static_cast<std::size_t>(total));
  for (std::int64_t turn = 1; turn <= total; ++turn) {
    SameWeight* best = nullptr;
    std::int64_t best_current = 0;
    std::uint16_t best_backend = 0;
    for (auto& [w, g] : by_weight) {
      const auto size = static_cast<std::int64_t>(g.members.size());
      const std::uint16_t leader = g.members[static_cast<std::size_t>(g.picks % size)];
      // nginx's current weight after `turn` increments and (picks / size) picks of the leader.
      const std::int64_t current = turn * g.weight - total * (g.picks / size);
      if (!best || current > best_current || (current == best_current && leader < best_backend)) {
        best = &g;
        best_current = current;
        best_backend = leader;
      }
    }
    sequence.push_back(best_backend);
    ++best->picks;
  }
  return sequence;
}

bool BackendPool::eligible(std::uint16_t i, std::span<const std::uint16_t> tried) const {
  return backends_[i].takes_new_connections() &&
         std::find(tried.begin(), tried.end(), i) == tried.end();
}

bool BackendPool::any_eligible(std::span<const std::uint16_t> tried) const {
  for (std::uint16_t i = 0; i < backends_.size(); ++i) {
    if (eligible(i, tried)) return true;
  }
  return false;
}

std::optional<std::uint16_t> BackendPool::pick(std::uint64_t hash,
                                               std::span<const std::uint16_t> tried) {
  switch (policy_) {
    case config::BalancePolicy::maglev:
      return pick_maglev(hash, tried);
    case config::BalancePolicy::round_robin:
      return pick_round_robin(tried);
    case config::BalancePolicy::least_connections:
      return pick_least_connections(tried);
  }
  return std::nullopt;
}

std::optional<std::uint16_t> BackendPool::pick_maglev(std::uint64_t hash,
                                                      std::span<const std::uint16_t> tried) {
  if (table_.empty()) return std::nullopt;  // every weight is 0
  const std::uint16_t first = table_.lookup(hash);
  if (eligible(first, tried)) return first;
  if (!any_eligible(tried)) return std::nullopt;
  // The next slots of the table: a down backend's clients spread like Maglev spreads them.
  std::span<const std::uint16_t> slots = table_.slots();
  auto slot = static_cast<std::size_t>(((hash >> 32) * slots.size()) >> 32);
  for (std::size_t n = 1; n < slots.size(); ++n) {
    const std::uint16_t b = slots[(slot + n) % slots.size()];
    if (eligible(b, tried)) return b;
  }
  return std::nullopt;
}

std::optional<std::uint16_t> BackendPool::pick_round_robin(std::span<const std::uint16_t> tried) {
  if (!any_eligible(tried)) return std::nullopt;
  const std::size_t n = round_robin_.size();
  // A retry continues from where the connection's first pick left the cursor instead of taking
  // a turn of its own, so a refusing backend does not shift every later connection onto itself.
  const std::uint32_t start = tried.empty() ? cursor_.fetch_add(1, std::memory_order_relaxed)
                                            : cursor_.load(std::memory_order_relaxed);
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint16_t i = round_robin_[(start + k) % n];
    if (!eligible(i, tried)) continue;
    // Skipped a down backend: the turn after the one taken is the next one's, so the down
    // backend's share spreads over the others instead of falling to its successor alone.
    if (k > 0 && tried.empty()) {
      cursor_.store(start + static_cast<std::uint32_t>(k) + 1, std::memory_order_relaxed);
    }
    return i;
  }
  return std::nullopt;
}

std::optional<std::uint16_t> BackendPool::pick_least_connections(
    std::span<const std::uint16_t> tried) {
  const std::size_t n = backends_.size();
  // A rotating start spreads ties (an idle service) instead of piling on the first backend.
  const std::uint32_t start = cursor_.fetch_add(1, std::memory_order_relaxed);
  std::optional<std::uint16_t> best;
  std::int64_t best_active = 0;
  std::int64_t best_weight = 1;
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = static_cast<std::uint16_t>((start + k) % n);
    if (!eligible(i, tried)) continue;
    const std::int64_t active = backends_[i].stats->active.load(std::memory_order_relaxed);
    const std::int64_t weight = backends_[i].weight;
    // active / weight < best_active / best_weight, without a division (weights are above 0 here).
    if (!best || active * best_weight < best_active * weight) {
      best = i;
      best_active = active;
      best_weight = weight;
    }
  }
  return best;
}

}  // namespace ferry::proxy
