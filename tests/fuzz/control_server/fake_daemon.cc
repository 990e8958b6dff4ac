// The fake daemon of fuzz_control_server: real config, boards and registry; counted effects.
#include "tests/fuzz/control_server/fake_daemon.hh"

#include <unistd.h>

#include <stdexcept>
#include <utility>

#include "lib/control/protocol.hh"

namespace ferry::fuzz {

using nlohmann::json;

FakeDaemon::FakeDaemon(std::string config_file, std::string broken_file,
                       metrics::Registry& registry, const control::AccessPolicy& policy)
    : config_file_(std::move(config_file)),
      broken_file_(std::move(broken_file)),
      config_(config::load_config(config_file_)),
      registry_(registry),
      policy_(policy) {
  reset({});
}

void FakeDaemon::reset(FakeBehaviour behaviour) {
  behaviour_ = std::move(behaviour);
  calls_ = {};
  admin_ = std::make_unique<admin::AdminBoard>();
  admin_->configure(config_.services);
  health_ = std::make_unique<health::HealthBoard>();
  for (const auto& service : config_.services) {
    for (const auto& backend : service.backends) health_->state(service.name, backend);
  }
  // One backend down, so `backend` answers "health":"down" for it.
  if (!config_.services.empty() && !config_.services.front().backends.empty()) {
    const auto& first = config_.services.front();
    health_->set_up(first.name, first.backends.front(), false);
  }
}

void FakeDaemon::take_handover_socket(UniqueFd socket, const control::Peer& peer) {
  ++calls_.handovers;
  if (peer.tcp || !policy_.allows(peer, control::Access::admin)) {
    calls_.handover_to_non_admin = true;
  }
  socket.reset();  // the connection ends here, as when the new ferryd gives up
}

json FakeDaemon::status_report() const {
  return {{"version", "fuzz"}, {"pid", static_cast<int>(getpid())}, {"state", "running"}};
}

json FakeDaemon::services_report() const {
  return {{"services", json::array()}};
}

json FakeDaemon::workers_report() const {
  return {{"workers", json::array()}};
}

json FakeDaemon::announce_report() const {
  return {{"enabled", false}};
}

json FakeDaemon::reload(const std::string& reason) {
  ++calls_.reloads;
  const std::string& file = behaviour_.reload_rejected ? broken_file_ : config_file_;
  try {
    config_ = config::load_config(file);
  } catch (const config::ConfigError& e) {
    throw control::CommandError("rejected", e.what());
  }
  return {{"reloaded", true},
          {"config_path", file},
          {"restart_required", json::array()},
          {"reason", reason}};
}

json FakeDaemon::start_upgrade(const std::string& why) {
  ++calls_.upgrades;
  if (!behaviour_.upgrade_error.empty()) {
    throw control::CommandError(behaviour_.upgrade_error,
                                "fake: the upgrade " + behaviour_.upgrade_error);
  }
  return {{"started", true},
          {"old_pid", static_cast<int>(getpid())},
          {"new_pid", 0},
          {"binary", "fake"},
          {"why", why}};
}

void FakeDaemon::apply_steering() {
  ++calls_.steerings;
  if (behaviour_.steering_broken || (behaviour_.steering_fails && calls_.steerings == 1)) {
    throw std::runtime_error("fake: the planes refused the new tables");
  }
}

}  // namespace ferry::fuzz
