// The management plane's connection budgets: control.max_connections, .admin_reserved_connections,
// .max_connections_per_uid, control.tcp.max_unauthenticated(_per_source), .auth_timeout_ms, and
// metrics.max_connections(_per_source), .request_timeout_ms.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

constexpr const char* kTcp = R"("listen": "127.0.0.1:9470", "token_file": "/etc/ferry/token")";

// Every budget of `c`, in the order of the file: control's three, control.tcp's three, metrics'.
std::vector<std::uint32_t> budgets(const Config& c) {
  return {c.control.max_connections,
          c.control.admin_reserved_connections,
          c.control.max_connections_per_uid,
          c.control.tcp.max_unauthenticated,
          c.control.tcp.max_unauthenticated_per_source,
          c.control.tcp.auth_timeout_ms,
          c.metrics.max_connections,
          c.metrics.max_connections_per_source,
          c.metrics.request_timeout_ms};
}

TEST(ConfigBudgets, DefaultsAreTheDocumentedOnes) {
  EXPECT_EQ(budgets(parse_config("{}", "f.json")),
            (std::vector<std::uint32_t>{1024, 64, 32, 64, 8, 3000, 256, 8, 3000}));
}

TEST(ConfigBudgets, EveryKeyIsReadAndWrittenBack) {
  Config c = parse_config(
      std::string(R"({"control": {"max_connections": 100, "admin_reserved_connections": 10,
                      "max_connections_per_uid": 5, "tcp": {)") +
          kTcp + R"(, "max_unauthenticated": 20, "max_unauthenticated_per_source": 2,
                      "auth_timeout_ms": 500}},
          "metrics": {"max_connections": 50, "max_connections_per_source": 3,
                      "request_timeout_ms": 700}})",
      "f.json");
  EXPECT_EQ(budgets(c), (std::vector<std::uint32_t>{100, 10, 5, 20, 2, 500, 50, 3, 700}));
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["control"]["admin_reserved_connections"], 10);
  EXPECT_EQ(j["control"]["tcp"]["max_unauthenticated_per_source"], 2);
  EXPECT_EQ(j["metrics"]["request_timeout_ms"], 700);
  EXPECT_EQ(parse_config(j.dump(), "f.json"), c);
}

TEST(ConfigBudgets, RangesAreCheckedAtTheValue) {
  std::string text = R"({"control": {"max_connections": 15}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "15"),
                  "control.max_connections: 15 is out of range (16..65536)");
  text = R"({"control": {"admin_reserved_connections": 0}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "0}"),
                  "control.admin_reserved_connections: 0 is out of range (1..65535)");
  text = R"({"control": {"max_connections_per_uid": 0}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "0}"),
                  "control.max_connections_per_uid: 0 is out of range (1..65536)");
  text = R"({"control": {"tcp": {"auth_timeout_ms": 99}}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "99"),
                  "control.tcp.auth_timeout_ms: 99 is out of range (100..60000)");
  text = R"({"metrics": {"request_timeout_ms": 60001}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "60001"),
                  "metrics.request_timeout_ms: 60001 is out of range (100..60000)");
  text = R"({"metrics": {"max_connections": "8"}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "\"8\""),
                  "metrics.max_connections: expected an integer (1..65536), got the string '8'");
  text = R"({"metrics": {"max_conections": 8}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "\"max_conections\""),
                  "unknown key 'max_conections' in metrics (did you mean 'max_connections'?)");
}

TEST(ConfigBudgets, TheReserveMustLeaveAShareToOtherPeers) {
  std::string text = R"({"control": {"max_connections": 64}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "64"),
                  "control: admin_reserved_connections 64 leaves no connection of "
                  "max_connections 64 to the other local peers; raise max_connections or lower "
                  "the reserve");
  // The unauthenticated pool comes out of the total only while TCP control is on.
  EXPECT_NO_THROW(parse_config(R"({"control": {"max_connections": 100}})", "f.json"));
  text = std::string(R"({"control": {"max_connections": 100, "tcp": {)") + kTcp + "}}}";
  EXPECT_ERROR_AT(text, 1, column_of(text, "100"),
                  "control: admin_reserved_connections 64 + tcp.max_unauthenticated 64 leaves no "
                  "connection of max_connections 100 to the other local peers; raise "
                  "max_connections or lower the reserve");
}

TEST(ConfigBudgets, APerKeyBudgetMayNotExceedItsPool) {
  std::string text = std::string(R"({"control": {"tcp": {)") + kTcp +
                     R"(, "max_unauthenticated": 4, "max_unauthenticated_per_source": 5}}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "5}"),
                  "control.tcp.max_unauthenticated_per_source: 5 is more than "
                  "max_unauthenticated (4)");
  text = R"({"metrics": {"max_connections": 4}})";
  EXPECT_ERROR_AT(text, 1, column_of(text, "4}"),
                  "metrics.max_connections: 4 is less than max_connections_per_source (8, its "
                  "default); set that too");
}

}  // namespace
}  // namespace ferry::config
