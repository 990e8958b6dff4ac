// Run-time steering of backends by the operator (the `backend` control command): each backend of
// each service is enabled, draining or disabled, and may have its configured weight overridden.
// Kept across reloads for every backend the new config still has; lost on restart (the config
// file is what a started ferryd serves; write lasting changes there).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/common/net.hh"
#include "lib/config/config.hh"
#include "lib/metrics/registry.hh"

namespace ferry::admin {

enum class AdminState : std::uint8_t {
  enabled,  // takes new flows and connections (when its weight is above 0 and it is up)
  drain,    // no new flows or connections; established UDP flows and open TCP connections stay
  disable,  // no traffic on UDP (its flows are re-balanced at once); open TCP connections finish
};
std::string_view to_string(AdminState state);
std::optional<AdminState> parse_admin_state(std::string_view text);  // "drain", "disable", "enable"

inline constexpr std::uint32_t kMaxWeight = config::ServiceConfig::kMaxWeight;

struct BackendAdmin {
  AdminState state = AdminState::enabled;
  std::optional<std::uint32_t> weight;  // set at run time; empty: the configured weight
  bool operator==(const BackendAdmin&) const = default;
};

// One configured backend of one service, as the operator steers it.
struct BackendSteering {
  std::string service;
  net::Endpoint backend;
  std::uint32_t configured_weight = 1;
  BackendAdmin admin;
  // The weight it balances with: the operator's, else the configured one.
  std::uint32_t weight() const { return admin.weight.value_or(configured_weight); }
  // The weight new flows and connections see: 0 while draining or disabled.
  std::uint32_t balancing_weight() const {
    return admin.state == AdminState::enabled ? weight() : 0;
  }
};

// Written on the control thread (commands, reloads), read there for table builds and by the
// metrics collector, so a mutex guards it.
class AdminBoard {
 public:
  // The configured backends and their weights (startup and every applied reload; not before a
  // reload is known to stand, so a rejected one loses nothing). The operator's state of a backend
  // the config still has is kept; one removed and added again starts enabled with its configured
  // weight.
  void configure(const std::vector<config::ServiceConfig>& services);
  // The backend as configured and steered; empty when the config has no such backend.
  std::optional<BackendSteering> find(const std::string& service,
                                      const net::Endpoint& backend) const;
  // Sets the state and/or the weight of a configured backend; returns the result, or empty when
  // the config has no such backend (nothing changes).
  std::optional<BackendSteering> set(const std::string& service, const net::Endpoint& backend,
                                     std::optional<AdminState> state,
                                     std::optional<std::uint32_t> weight);
  // Every configured backend, in (service, backend) order.
  std::vector<BackendSteering> snapshot() const;
  // ferry_backend_weight and ferry_backend_admin_state for every configured backend.
  void collect(metrics::SnapshotBuilder& out) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, net::Endpoint>, BackendSteering> backends_;
};

}  // namespace ferry::admin
