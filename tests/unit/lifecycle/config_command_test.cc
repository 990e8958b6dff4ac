// The `config` control command (what `ferryctl config` prints) with a QUIC-LB key configured:
// the response says a key is set and never carries it.
#include <gtest/gtest.h>

#include <string>

#include "lib/admin/admin_board.hh"
#include "lib/config/config.hh"
#include "lib/control/commands.hh"
#include "lib/health/health_board.hh"
#include "lib/lifecycle/control_commands.hh"
#include "lib/metrics/registry.hh"

namespace ferry::lifecycle {
namespace {

constexpr const char* kKey = "8f95f09245765f80256934e50c66207f";

// The daemon as the config command sees it: a file and the config read from it.
class ConfigOnlyDaemon final : public CommandTarget {
 public:
  explicit ConfigOnlyDaemon(config::Config config) : config_(std::move(config)) {}
  nlohmann::json status_report() const override { return nlohmann::json::object(); }
  nlohmann::json services_report() const override { return nlohmann::json::object(); }
  nlohmann::json workers_report() const override { return nlohmann::json::object(); }
  nlohmann::json announce_report() const override { return nlohmann::json::object(); }
  const std::string& config_file() const override { return file_; }
  const config::Config& running_config() const override { return config_; }
  metrics::Registry& metrics_registry() override { return registry_; }
  admin::AdminBoard& admin_board() override { return admin_; }
  health::HealthBoard& health_board() override { return health_; }
  nlohmann::json reload(const std::string&) override { return nullptr; }
  nlohmann::json start_upgrade(const std::string&) override { return nullptr; }
  void apply_steering() override {}

 private:
  std::string file_ = "/etc/ferry/ferryd.json";
  config::Config config_;
  metrics::Registry registry_;
  admin::AdminBoard admin_;
  health::HealthBoard health_;
};

TEST(ConfigCommand, QuicLbKeyIsShownAsSetAndNeverSent) {
  config::Config c = config::parse_config(
      std::string(R"({"services": [{"name": "h3", "vip": "10.0.0.13", "port": 443,
        "backends": [{"address": "10.0.1.9:443", "server_id": "0001"}],
        "quic_lb": {"configs": [{"id": 0, "server_id_bytes": 2, "nonce_bytes": 6, "key": ")") +
          kKey + R"("}]}}]})",
      "f.json");
  ConfigOnlyDaemon daemon(c);
  control::CommandTable table;
  register_daemon_commands(table, daemon);
  const std::string response = control::dispatch(table, control::AccessPolicy(0), control::Peer{},
                                                 R"({"id": 1, "cmd": "config"})");
  nlohmann::json j = nlohmann::json::parse(response);
  ASSERT_EQ(j["ok"], true) << response;
  EXPECT_EQ(j["result"]["config"]["services"][0]["quic_lb"]["configs"][0]["key"], "(set)");
  EXPECT_EQ(j["result"]["config"]["services"][0]["backends"][0]["server_id"], "0001");
  EXPECT_EQ(response.find(kKey), std::string::npos);
  EXPECT_EQ(response.find("8f95f092"), std::string::npos);
}

}  // namespace
}  // namespace ferry::lifecycle
