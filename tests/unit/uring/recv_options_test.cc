// Receive-path switches: environment overrides, resolution against the probe (auto takes what
// the kernel has, on insists, off falls back), and the mapping from the operator's config.
#include "lib/uring/recv_options.hh"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>

#include "lib/uring/config_bridge.hh"

namespace ferry::uring {
namespace {

UringFeatures everything() {
  UringFeatures f;
  f.available = true;
  f.multishot_recv = f.multishot_accept = f.bundle = f.incremental = f.send_zc = true;
  return f;
}

TEST(RecvOptions, EnvironmentZeroForcesEachFallback) {
  RecvOptions o = with_env_overrides({}, [](const char* name) -> const char* {
    return std::strcmp(name, "FERRY_URING_BUNDLE") == 0 ? "0" : nullptr;
  });
  EXPECT_EQ(o.bundle, Tristate::off);
  EXPECT_EQ(o.incremental, Tristate::automatic);
  EXPECT_EQ(o.multishot, Tristate::automatic);

  o = with_env_overrides({}, [](const char*) -> const char* { return "0"; });
  RecvModes m = resolve_modes(o, everything());
  EXPECT_EQ(m, (RecvModes{false, false, false}));
}

TEST(RecvOptions, EnvironmentAutoOrUnsetKeepsTheConfiguredValue) {
  RecvOptions configured;
  configured.bundle = Tristate::off;
  configured.incremental = Tristate::on;
  RecvOptions o = with_env_overrides(configured, [](const char*) -> const char* { return "auto"; });
  EXPECT_EQ(o.bundle, Tristate::off);
  EXPECT_EQ(o.incremental, Tristate::on);
  o = with_env_overrides(configured, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(o.bundle, Tristate::off);
}

TEST(RecvOptions, EnvironmentRejectsGarbage) {
  EXPECT_THROW(with_env_overrides({}, [](const char*) -> const char* { return "maybe"; }),
               std::runtime_error);
}

TEST(RecvOptions, AutoTakesWhatTheKernelHas) {
  UringFeatures f = everything();
  f.bundle = false;
  RecvModes m = resolve_modes({}, f);
  EXPECT_FALSE(m.bundle);
  EXPECT_TRUE(m.incremental);
  EXPECT_TRUE(m.multishot);
}

TEST(RecvOptions, OnWithoutKernelSupportIsAStartupErrorNamingTheKey) {
  UringFeatures f = everything();
  f.incremental = false;
  RecvOptions o;
  o.incremental = Tristate::on;
  try {
    resolve_modes(o, f);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tcp.buffers.incremental"), std::string::npos) << e.what();
  }
}

TEST(RecvOptions, OffNeverUsesAFeature) {
  RecvOptions o;
  o.multishot = Tristate::off;
  RecvModes m = resolve_modes(o, everything());
  EXPECT_FALSE(m.multishot);
  EXPECT_TRUE(m.bundle);
  EXPECT_EQ(m.to_json(),
            (nlohmann::json{{"bundle", true}, {"incremental", true}, {"multishot", false}}));
}

TEST(RecvOptions, ConfigSwitchesMapOntoOptions) {
  config::BufferConfig b;
  b.bundle = config::Tristate::off;
  b.incremental = config::Tristate::on;
  RecvOptions o = recv_options_from(b);
  EXPECT_EQ(o.bundle, Tristate::off);
  EXPECT_EQ(o.incremental, Tristate::on);
  EXPECT_EQ(o.multishot, Tristate::automatic);
  EXPECT_EQ(to_uring(config::Tristate::automatic), Tristate::automatic);
}

}  // namespace
}  // namespace ferry::uring
