// One generation of a proxy service's backends: their addresses, health flags and stats, and the
// choice of a backend for a new connection by the service's balance policy. Immutable once
// built (a reload builds a new one); connections keep the generation they started with.
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

  bool up() const { return !health || health->up.load(std::memory_order_relaxed); }
};

// The hash a maglev service balances on: the client's address only (not its port), so one client
// keeps its backend across connections while the backend set is stable.
std::uint64_t client_hash(const net::IpAddress& client);

class BackendPool {
 public:
  // `backends` non-empty, at most 65535. Builds the Maglev table for maglev.
  BackendPool(std::vector<Backend> backends, config::BalancePolicy policy);
  BackendPool(const BackendPool&) = delete;
  BackendPool& operator=(const BackendPool&) = delete;

  // A backend that is up and not in `tried`, by the policy; nullopt when none is left.
  std::optional<std::uint16_t> pick(std::uint64_t client_hash,
                                    std::span<const std::uint16_t> tried);

  std::size_t size() const { return backends_.size(); }
  const Backend& backend(std::size_t i) const { return backends_[i]; }
  config::BalancePolicy policy() const { return policy_; }

 private:
  bool eligible(std::uint16_t i, std::span<const std::uint16_t> tried) const;
  std::optional<std::uint16_t> pick_maglev(std::uint64_t hash,
                                           std::span<const std::uint16_t> tried);
  std::optional<std::uint16_t> pick_round_robin(std::span<const std::uint16_t> tried);
  std::optional<std::uint16_t> pick_least_connections(std::span<const std::uint16_t> tried);

  std::vector<Backend> backends_;
  config::BalancePolicy policy_;
  packet::MaglevTable table_;
  std::atomic<std::uint32_t> cursor_{0};  // round_robin, and where least_connections starts
};

}  // namespace ferry::proxy
