// The daemon's control command table over CommandTarget, the daemon as its commands see it.
// Daemon::State is the one target; the control server fuzzer's fake daemon is the other, so the
// fuzzer runs this very table and its argument checks without planes, sockets or processes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lib/admin/admin_board.hh"
#include "lib/config/config.hh"
#include "lib/control/commands.hh"
#include "lib/health/health_board.hh"
#include "lib/metrics/registry.hh"

namespace ferry::lifecycle {

// Everything runs on the control thread, as the commands do.
class CommandTarget {
 public:
  // The results of the commands that only report: status, services, workers, announce.
  virtual nlohmann::json status_report() const = 0;
  virtual nlohmann::json services_report() const = 0;
  virtual nlohmann::json workers_report() const = 0;
  virtual nlohmann::json announce_report() const = 0;
  // What `config` and `stats` read, and what `backend` looks up and steers.
  virtual const std::string& config_file() const = 0;
  virtual const config::Config& running_config() const = 0;
  virtual metrics::Registry& metrics_registry() = 0;
  virtual admin::AdminBoard& admin_board() = 0;
  virtual health::HealthBoard& health_board() = 0;
  // What the admin commands set going: `reload`, `upgrade` (a new process), and `backend`'s
  // steering applied to the planes. Each throws control::CommandError when it refuses.
  virtual nlohmann::json reload(const std::string& reason) = 0;
  virtual nlohmann::json start_upgrade(const std::string& why) = 0;
  virtual void apply_steering() = 0;

 protected:
  ~CommandTarget() = default;
};

// Adds help, status, stats, services, workers, config, announce, reload, backend, upgrade and
// handover (docs/control-protocol.md) to `table`, each calling into `daemon`, which must outlive
// it.
void register_daemon_commands(control::CommandTable& table, CommandTarget& daemon);

// The `backend` command (backend_command.cc), part of register_daemon_commands().
void add_backend_command(control::CommandTable& table, CommandTarget& daemon);

}  // namespace ferry::lifecycle
