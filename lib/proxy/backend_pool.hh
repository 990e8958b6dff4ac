// One generation of a proxy service's backends: their addresses, weights, health flags and
// stats, and the choice of a backend for a new connection by the service's balance policy, each
// policy honouring the weights. Immutable once built (a reload or a weight change builds a new
// one); connections keep the generation they started with.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/config/config.hh"
#include "lib/health/health_board.hh"
#include "lib/packet/maglev.hh"
#include "lib/proxy/proxy_counters.hh"

namespace ferry::proxy {

struct Backend {
  net::Endpoint endpoint;
  std::string name;  // endpoint text, the metrics label and the Maglev identity
  sockaddr_storage address{};
  socklen_t address_len = 0;
  std::shared_ptr<const health::BackendState> health;  // null: always up
  std::shared_ptr<BackendStats> stats;
  std::uint32_t weight = 1;  // 0..256 (config::ServiceConfig::kMaxWeight); 0: no new connections

  bool up() const { return !health || health->up.load(std::memory_order_relaxed); }
  // The one place that decides whether this backend may take a new connection: weight above 0
  // and health up. (Open connections are never moved, whatever this says.)
  bool takes_new_connections() const { return weight > 0 && up(); }
};

// The hash a maglev service balances on: the client's address only (not its port), so one client
// keeps its backend across connections while the backend set is stable.
std::uint64_t client_hash(const net::IpAddress& client);

// The policies, all weighted (a backend of weight w gets w/W of the new connections, W the sum):
// * maglev: Maglev table over the weights (packet/maglev.hh), keyed by client_hash().
// * round_robin: nginx's smooth weighted round robin, precomputed as one period of its sequence
//   (sum of the weights over their gcd, 2 bytes each) that an atomic cursor walks: workers pick
//   concurrently without a lock. A backend that cannot take the connection is passed over.
// * least_connections: fewest open connections per unit of weight (active_a * w_b < active_b *
//   w_a, no division), ties spread by a rotating start.
class BackendPool {
 public:
  // `backends` non-empty, at most 65535. Builds the Maglev table (maglev) or the smooth weighted
  // round robin sequence (round_robin); a `previous` pool (the one this replaces on a reload)
  // whose Maglev table was built from the same backends and weights lends it instead.
  BackendPool(std::vector<Backend> backends, config::BalancePolicy policy,
              const BackendPool* previous = nullptr);
  BackendPool(const BackendPool&) = delete;
  BackendPool& operator=(const BackendPool&) = delete;

  // A backend that takes new connections (Backend::takes_new_connections) and is not in `tried`,
  // by the policy; nullopt when none is left.
  std::optional<std::uint16_t> pick(std::uint64_t client_hash,
                                    std::span<const std::uint16_t> tried);

  std::size_t size() const { return backends_.size(); }
  const Backend& backend(std::size_t i) const { return backends_[i]; }
  config::BalancePolicy policy() const { return policy_; }

 private:
  bool eligible(std::uint16_t i, std::span<const std::uint16_t> tried) const;
  bool any_eligible(std::span<const std::uint16_t> tried) const;
  std::optional<std::uint16_t> pick_maglev(std::uint64_t hash,
                                           std::span<const std::uint16_t> tried);
  std::optional<std::uint16_t> pick_round_robin(std::span<const std::uint16_t> tried);
  std::optional<std::uint16_t> pick_least_connections(std::span<const std::uint16_t> tried);

  std::vector<Backend> backends_;
  config::BalancePolicy policy_;
  packet::MaglevTable table_;
  std::vector<std::uint16_t> round_robin_;  // one period of the smooth weighted sequence
  std::atomic<std::uint32_t> cursor_{0};    // round_robin, and where least_connections starts
};

// One period of nginx's smooth weighted round robin over `weights` (each turn: every backend's
// current weight grows by its weight, the largest, first in order on a tie, is picked and loses
// the total), with the weights divided by their gcd first; weight 0 backends never appear.
// Empty when every weight is 0. Built in O(length x distinct weights): backends of one weight
// take their turns in order, so each turn compares one candidate per distinct weight.
std::vector<std::uint16_t> smooth_weighted_sequence(std::span<const std::uint32_t> weights);

}  // namespace ferry::proxy
