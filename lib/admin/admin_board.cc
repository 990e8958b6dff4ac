// AdminBoard: the operator's run-time state per configured backend, a small map guarded by a
// mutex.
#include "lib/admin/admin_board.hh"

namespace ferry::admin {
namespace {

// By the endpoint itself, not its text: a lookup formats nothing.
std::pair<std::string, net::Endpoint> key_of(const std::string& service,
                                             const net::Endpoint& backend) {
  return {service, backend};
}

}  // namespace

std::string_view to_string(AdminState state) {
  switch (state) {
    case AdminState::enabled:
      return "enabled";
    case AdminState::drain:
      return "drain";
    case AdminState::disable:
      return "disabled";
  }
  return "enabled";
}

std::optional<AdminState> parse_admin_state(std::string_view text) {
  if (text == "enable") return AdminState::enabled;
  if (text == "drain") return AdminState::drain;
  if (text == "disable") return AdminState::disable;
  return std::nullopt;
}

void AdminBoard::configure(const std::vector<config::ServiceConfig>& services) {
  std::map<std::pair<std::string, net::Endpoint>, BackendSteering> next;
  std::lock_guard lock(mutex_);
  for (const config::ServiceConfig& service : services) {
    for (std::size_t i = 0; i < service.backends.size(); ++i) {
      const net::Endpoint& backend = service.backends[i];
      auto key = key_of(service.name, backend);
      BackendSteering steering{service.name, backend, service.weight(i), {}};
      if (auto it = backends_.find(key); it != backends_.end()) steering.admin = it->second.admin;
      next.emplace(std::move(key), std::move(steering));
    }
  }
  backends_ = std::move(next);
}

std::optional<BackendSteering> AdminBoard::find(const std::string& service,
                                                const net::Endpoint& backend) const {
  std::lock_guard lock(mutex_);
  auto it = backends_.find(key_of(service, backend));
  if (it == backends_.end()) return std::nullopt;
  return it->second;
}

std::optional<BackendSteering> AdminBoard::set(const std::string& service,
                                               const net::Endpoint& backend,
                                               std::optional<AdminState> state,
                                               std::optional<std::uint32_t> weight) {
  std::lock_guard lock(mutex_);
  auto it = backends_.find(key_of(service, backend));
  if (it == backends_.end()) return std::nullopt;
  if (state) it->second.admin.state = *state;
  if (weight) it->second.admin.weight = *weight;
  return it->second;
}

std::vector<BackendSteering> AdminBoard::snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<BackendSteering> out;
  out.reserve(backends_.size());
  for (const auto& [key, steering] : backends_) out.push_back(steering);
  return out;
}

void AdminBoard::collect(metrics::SnapshotBuilder& out) const {
  for (const BackendSteering& b : snapshot()) {
    metrics::Labels labels{{"service", b.service}, {"backend", b.backend.to_string()}};
    out.gauge("ferry_backend_weight",
              "The weight the backend balances with: set at run time (ferryctl backend), else "
              "configured.",
              labels, b.weight());
    for (AdminState state : {AdminState::enabled, AdminState::drain, AdminState::disable}) {
      metrics::Labels with_state = labels;
      with_state.emplace_back("state", std::string(to_string(state)));
      out.gauge("ferry_backend_admin_state",
                "1 for the backend's run-time state (enabled, drain, disabled), 0 for the others.",
                std::move(with_state), b.admin.state == state ? 1 : 0);
    }
  }
}

}  // namespace ferry::admin
