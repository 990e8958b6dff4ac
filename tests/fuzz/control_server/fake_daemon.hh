// The daemon behind the control commands in fuzz_control_server: its config read from a file by
// the real loader, real admin and health boards, and the fuzzer's registry. The reports are
// fixed, and what the admin commands would set going (a reload, an upgrade's new process, the
// planes' steering, the handover's socket) is only counted, with the peer that asked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lib/common/unique_fd.hh"
#include "lib/control/commands.hh"
#include "lib/lifecycle/control_commands.hh"

namespace ferry::fuzz {

// How the fake answers the admin commands' effects for one input.
struct FakeBehaviour {
  bool reload_rejected = false;  // reload reads the broken config file instead of the good one
  bool steering_fails = false;   // the first apply_steering() throws, the restore succeeds
  bool steering_broken = false;  // every apply_steering() throws, the restore too
  std::string upgrade_error;     // "busy", "failed", or empty: the upgrade "starts"
};

struct FakeCalls {
  int reloads = 0;
  int upgrades = 0;
  int steerings = 0;
  int handovers = 0;
  bool handover_to_non_admin = false;  // the taker got a TCP peer or one without admin access
};

class FakeDaemon final : public lifecycle::CommandTarget {
 public:
  // `config_file` is valid; `broken_file` is what a rejected reload reads.
  FakeDaemon(std::string config_file, std::string broken_file, metrics::Registry& registry,
             const control::AccessPolicy& policy);

  // Before each input: the boards as configured (one backend down), nothing counted.
  void reset(FakeBehaviour behaviour);
  const FakeCalls& calls() const { return calls_; }

  // The control server's socket taker for "handover": counts and closes the socket.
  void take_handover_socket(UniqueFd socket, const control::Peer& peer);

  nlohmann::json status_report() const override;
  nlohmann::json services_report() const override;
  nlohmann::json workers_report() const override;
  nlohmann::json announce_report() const override;
  const std::string& config_file() const override { return config_file_; }
  const config::Config& running_config() const override { return config_; }
  metrics::Registry& metrics_registry() override { return registry_; }
  admin::AdminBoard& admin_board() override { return *admin_; }
  health::HealthBoard& health_board() override { return *health_; }
  nlohmann::json reload(const std::string& reason) override;
  nlohmann::json start_upgrade(const std::string& why) override;
  void apply_steering() override;

 private:
  std::string config_file_;
  std::string broken_file_;
  config::Config config_;
  metrics::Registry& registry_;
  const control::AccessPolicy& policy_;
  std::unique_ptr<admin::AdminBoard> admin_;
  std::unique_ptr<health::HealthBoard> health_;
  FakeBehaviour behaviour_;
  FakeCalls calls_;
};

}  // namespace ferry::fuzz
