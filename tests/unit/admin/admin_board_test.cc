// AdminBoard and effective_config: what the operator set, kept across reloads for backends the
// config still has, and the weights the data planes balance with.
#include "lib/admin/admin_board.hh"

#include <gtest/gtest.h>

#include "lib/admin/effective_config.hh"

namespace ferry::admin {
namespace {

net::Endpoint ep(const char* text) {
  return *net::Endpoint::parse(text);
}

config::ServiceConfig service(const char* name, std::vector<const char*> backends,
                              std::vector<std::uint32_t> weights = {}) {
  config::ServiceConfig s;
  s.name = name;
  for (const char* b : backends) s.backends.push_back(ep(b));
  s.backend_weights = weights.empty() ? std::vector<std::uint32_t>(backends.size(), 1) : weights;
  return s;
}

config::Config config_of(std::vector<config::ServiceConfig> services) {
  config::Config c;
  c.services = std::move(services);
  return c;
}

TEST(AdminBoard, EveryConfiguredBackendStartsEnabledWithItsConfiguredWeight) {
  AdminBoard board;
  board.configure({service("web", {"10.0.1.2:80", "10.0.1.3:80"}, {1, 3})});
  auto b = board.find("web", ep("10.0.1.3:80"));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->admin.state, AdminState::enabled);
  EXPECT_EQ(b->weight(), 3u);
  EXPECT_EQ(b->balancing_weight(), 3u);
  EXPECT_FALSE(board.find("web", ep("10.0.1.4:80")));
  EXPECT_FALSE(board.find("api", ep("10.0.1.2:80")));
  EXPECT_EQ(board.snapshot().size(), 2u);
}

TEST(AdminBoard, DrainAndDisableWeighZeroForNewTrafficAndKeepTheWeight) {
  AdminBoard board;
  board.configure({service("web", {"10.0.1.2:80"}, {2})});
  auto drained = board.set("web", ep("10.0.1.2:80"), AdminState::drain, std::nullopt);
  ASSERT_TRUE(drained);
  EXPECT_EQ(drained->weight(), 2u);
  EXPECT_EQ(drained->balancing_weight(), 0u);
  auto reweighted = board.set("web", ep("10.0.1.2:80"), std::nullopt, 5u);
  EXPECT_EQ(reweighted->admin.state, AdminState::drain) << "a weight alone keeps the state";
  EXPECT_EQ(reweighted->weight(), 5u);
  auto enabled = board.set("web", ep("10.0.1.2:80"), AdminState::enabled, std::nullopt);
  EXPECT_EQ(enabled->balancing_weight(), 5u);
  EXPECT_FALSE(board.set("web", ep("10.0.1.9:80"), AdminState::drain, std::nullopt))
      << "a backend the config does not have changes nothing";
  EXPECT_EQ(board.snapshot().size(), 1u);
}

TEST(AdminBoard, AReloadKeepsTheStateOfBackendsItStillHasAndForgetsRemovedOnes) {
  AdminBoard board;
  board.configure({service("web", {"10.0.1.2:80", "10.0.1.3:80"})});
  board.set("web", ep("10.0.1.2:80"), AdminState::drain, std::nullopt);
  board.set("web", ep("10.0.1.3:80"), AdminState::disable, 4u);
  // The reload changes 10.0.1.2's configured weight and removes 10.0.1.3.
  board.configure({service("web", {"10.0.1.2:80", "10.0.1.4:80"}, {7, 1})});
  auto kept = board.find("web", ep("10.0.1.2:80"));
  EXPECT_EQ(kept->admin.state, AdminState::drain);
  EXPECT_EQ(kept->configured_weight, 7u);
  EXPECT_FALSE(board.find("web", ep("10.0.1.3:80")));
  // Added again: enabled, its configured weight.
  board.configure({service("web", {"10.0.1.2:80", "10.0.1.3:80"})});
  auto back = board.find("web", ep("10.0.1.3:80"));
  EXPECT_EQ(back->admin.state, AdminState::enabled);
  EXPECT_EQ(back->weight(), 1u);
}

TEST(EffectiveConfig, AppliesTheOperatorsWeightsAndZeroForDrainedOrDisabled) {
  config::Config c =
      config_of({service("web", {"10.0.1.2:80", "10.0.1.3:80", "10.0.1.4:80"}, {1, 2, 3}),
                 service("dns", {"10.0.2.2:53"})});
  AdminBoard board;
  board.configure(c.services);
  board.set("web", ep("10.0.1.2:80"), std::nullopt, 9u);
  board.set("web", ep("10.0.1.3:80"), AdminState::drain, std::nullopt);
  board.set("web", ep("10.0.1.4:80"), AdminState::disable, std::nullopt);
  config::Config effective = effective_config(c, board);
  EXPECT_EQ(effective.services[0].backend_weights, (std::vector<std::uint32_t>{9, 0, 0}));
  EXPECT_EQ(effective.services[1].backend_weights, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(c.services[0].backend_weights, (std::vector<std::uint32_t>{1, 2, 3}))
      << "the loaded config is left as it is";
  EXPECT_TRUE(keeps_flows(board, "web", ep("10.0.1.3:80"))) << "a drained backend keeps its flows";
  EXPECT_FALSE(keeps_flows(board, "web", ep("10.0.1.4:80")));
  EXPECT_TRUE(keeps_flows(board, "other", ep("10.0.9.9:80")));
}

TEST(EffectiveConfig, UsesTheNewConfigsWeightForABackendTheOperatorDidNotReweigh) {
  AdminBoard board;
  board.configure({service("web", {"10.0.1.2:80"}, {1})});
  board.set("web", ep("10.0.1.2:80"), AdminState::enabled, std::nullopt);
  // A reload being tried (not yet configured on the board) raises the configured weight.
  config::Config next = config_of({service("web", {"10.0.1.2:80"}, {4})});
  EXPECT_EQ(effective_config(next, board).services[0].backend_weights,
            (std::vector<std::uint32_t>{4}));
}

TEST(AdminBoard, MetricsHaveTheWeightAndOneStateSetPerBackend) {
  AdminBoard board;
  board.configure({service("web", {"10.0.1.2:80"}, {2})});
  board.set("web", ep("10.0.1.2:80"), AdminState::drain, std::nullopt);
  metrics::SnapshotBuilder out;
  board.collect(out);
  double weight = -1;
  std::map<std::string, double> states;
  for (const metrics::Family& f : std::move(out).finish()) {
    for (const metrics::Sample& s : f.samples) {
      if (f.name == "ferry_backend_weight") weight = s.value;
      if (f.name == "ferry_backend_admin_state") {
        for (const auto& [k, v] : s.labels) {
          if (k == "state") states[v] = s.value;
        }
      }
    }
  }
  EXPECT_EQ(weight, 2);
  EXPECT_EQ(states, (std::map<std::string, double>{{"disabled", 0}, {"drain", 1}, {"enabled", 0}}));
}

}  // namespace
}  // namespace ferry::admin
