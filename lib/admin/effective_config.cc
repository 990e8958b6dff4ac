// The configuration the data planes serve (see effective_config.hh).
#include "lib/admin/effective_config.hh"

namespace ferry::admin {

config::Config effective_config(const config::Config& config, const AdminBoard& board) {
  config::Config out = config;
  for (config::ServiceConfig& service : out.services) {
    service.backend_weights.resize(service.backends.size(), 1);  // a config built by hand
    for (std::size_t i = 0; i < service.backends.size(); ++i) {
      // The config's own weight (a reload may have changed it), unless the operator set one.
      if (auto steering = board.find(service.name, service.backends[i])) {
        steering->configured_weight = service.backend_weights[i];
        service.backend_weights[i] = steering->balancing_weight();
      }
    }
  }
  return out;
}

bool keeps_flows(const AdminBoard& board, const std::string& service,
                 const net::Endpoint& backend) {
  auto steering = board.find(service, backend);
  return !steering || steering->admin.state != AdminState::disable;
}

}  // namespace ferry::admin
