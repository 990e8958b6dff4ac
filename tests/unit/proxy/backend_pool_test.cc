// Backend choice of the TCP proxy: every balance policy, down and already tried backends
// skipped, least connections following the open counts, maglev stable per client address; and
// weights: each policy's share by weight, weight 0 never chosen, smooth weighted round robin as
// nginx orders it.
#include "lib/proxy/backend_pool.hh"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace ferry::proxy {
namespace {

struct Fixture {
  health::HealthBoard board;
  std::vector<net::Endpoint> endpoints;

  explicit Fixture(int n) {
    for (int i = 0; i < n; ++i) {
      endpoints.push_back(*net::Endpoint::parse("10.0.1." + std::to_string(i + 1) + ":80"));
    }
  }
  // Weights in endpoint order; missing ones are 1.
  std::shared_ptr<BackendPool> pool(config::BalancePolicy policy,
                                    std::vector<std::uint32_t> weights = {}) {
    std::vector<Backend> backends;
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      const net::Endpoint& e = endpoints[i];
      Backend b;
      b.endpoint = e;
      b.name = e.to_string();
      b.address_len = e.to_sockaddr(b.address);
      b.health = board.state("web", e);
      b.stats = std::make_shared<BackendStats>();
      b.weight = i < weights.size() ? weights[i] : 1;
      backends.push_back(std::move(b));
    }
    return std::make_shared<BackendPool>(std::move(backends), policy);
  }
  void down(int i) { board.set_up("web", endpoints[i], false); }
  void up(int i) { board.set_up("web", endpoints[i], true); }
};

std::uint64_t hash_of(int client) {
  return client_hash(*net::IpAddress::parse("192.0.2." + std::to_string(client)));
}

TEST(BackendPool, RoundRobinCyclesThroughEveryBackend) {
  Fixture f(3);
  auto pool = f.pool(config::BalancePolicy::round_robin);
  std::vector<int> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(*pool->pick(0, {}));
  EXPECT_EQ(picks, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(BackendPool, RoundRobinSkipsDownBackends) {
  Fixture f(3);
  auto pool = f.pool(config::BalancePolicy::round_robin);
  f.down(1);
  std::map<int, int> count;
  for (int i = 0; i < 30; ++i) ++count[*pool->pick(0, {})];
  EXPECT_EQ(count[1], 0);
  EXPECT_EQ(count[0], 15);
  EXPECT_EQ(count[2], 15);
  f.up(1);
  std::set<int> seen;
  for (int i = 0; i < 3; ++i) seen.insert(*pool->pick(0, {}));
  EXPECT_EQ(seen.size(), 3u);
}

TEST(BackendPool, TriedBackendsAreNotPickedAgain) {
  Fixture f(3);
  for (auto policy : {config::BalancePolicy::round_robin, config::BalancePolicy::least_connections,
                      config::BalancePolicy::maglev}) {
    auto pool = f.pool(policy);
    std::vector<std::uint16_t> tried;
    for (int i = 0; i < 3; ++i) {
      auto p = pool->pick(hash_of(7), tried);
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(std::count(tried.begin(), tried.end(), *p), 0);
      tried.push_back(*p);
    }
    EXPECT_FALSE(pool->pick(hash_of(7), tried).has_value()) << to_string(policy);
  }
}

TEST(BackendPool, NothingWhenEveryBackendIsDown) {
  Fixture f(2);
  for (auto policy : {config::BalancePolicy::round_robin, config::BalancePolicy::least_connections,
                      config::BalancePolicy::maglev}) {
    auto pool = f.pool(policy);
    f.down(0);
    f.down(1);
    EXPECT_FALSE(pool->pick(hash_of(1), {}).has_value()) << to_string(policy);
    f.up(1);
    EXPECT_EQ(pool->pick(hash_of(1), {}), std::optional<std::uint16_t>(1)) << to_string(policy);
    f.up(0);
  }
}

TEST(BackendPool, LeastConnectionsPicksTheFewestOpen) {
  Fixture f(3);
  auto pool = f.pool(config::BalancePolicy::least_connections);
  pool->backend(0).stats->active = 5;
  pool->backend(1).stats->active = 2;
  pool->backend(2).stats->active = 7;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*pool->pick(0, {}), 1);
  f.down(1);
  EXPECT_EQ(*pool->pick(0, {}), 0);
  f.up(1);
  pool->backend(1).stats->active = 9;
  EXPECT_EQ(*pool->pick(0, {}), 0);
}

TEST(BackendPool, LeastConnectionsSpreadsTies) {
  Fixture f(4);
  auto pool = f.pool(config::BalancePolicy::least_connections);
  std::set<int> seen;
  for (int i = 0; i < 4; ++i) seen.insert(*pool->pick(0, {}));
  EXPECT_EQ(seen.size(), 4u);
}

TEST(BackendPool, MaglevKeepsAClientOnOneBackendAndSpreadsClients) {
  Fixture f(4);
  auto pool = f.pool(config::BalancePolicy::maglev);
  std::map<int, int> per_backend;
  for (int c = 1; c <= 200; ++c) {
    const int first = *pool->pick(hash_of(c), {});
    for (int again = 0; again < 3; ++again) EXPECT_EQ(*pool->pick(hash_of(c), {}), first);
    ++per_backend[first];
  }
  EXPECT_EQ(per_backend.size(), 4u);
  for (const auto& [b, n] : per_backend) EXPECT_GT(n, 20) << "backend " << b;
}

TEST(BackendPool, MaglevMovesOnlyTheDownBackendsClients) {
  Fixture f(4);
  auto pool = f.pool(config::BalancePolicy::maglev);
  std::map<int, int> before;
  for (int c = 1; c <= 200; ++c) before[c] = *pool->pick(hash_of(c), {});
  f.down(2);
  int moved = 0;
  for (int c = 1; c <= 200; ++c) {
    const int now = *pool->pick(hash_of(c), {});
    EXPECT_NE(now, 2);
    if (before[c] != 2) {
      EXPECT_EQ(now, before[c]) << "client " << c;
    }
    moved += now != before[c];
  }
  int on_two = 0;
  for (const auto& [c, b] : before) on_two += b == 2;
  EXPECT_EQ(moved, on_two);
}

constexpr config::BalancePolicy kPolicies[] = {config::BalancePolicy::round_robin,
                                               config::BalancePolicy::least_connections,
                                               config::BalancePolicy::maglev};

// nginx's smooth weighted round robin step by step, every backend compared on every turn.
std::vector<std::uint16_t> nginx_order(const std::vector<std::uint32_t>& weights, std::size_t n) {
  std::vector<std::int64_t> current(weights.size(), 0);
  std::int64_t total = 0;
  for (std::uint32_t w : weights) total += w;
  std::vector<std::uint16_t> out;
  for (std::size_t turn = 0; turn < n; ++turn) {
    std::size_t best = weights.size();
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (weights[i] == 0) continue;
      current[i] += weights[i];
      if (best == weights.size() || current[i] > current[best]) best = i;
    }
    current[best] -= total;
    out.push_back(static_cast<std::uint16_t>(best));
  }
  return out;
}

TEST(SmoothWeightedSequence, IsNginxsOrder) {
  // nginx's own example: weights 5, 1, 1 give a a b a c a a.
  const std::vector<std::uint32_t> five_one_one{5, 1, 1};
  EXPECT_EQ(smooth_weighted_sequence(five_one_one),
            (std::vector<std::uint16_t>{0, 0, 1, 0, 2, 0, 0}));
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::uint32_t> weights(1 + rng() % 12);
    for (auto& w : weights) w = rng() % 4 == 0 ? 0 : 1 + rng() % 9;  // repeats and zeros
    weights[rng() % weights.size()] = 1 + rng() % 9;
    std::vector<std::uint16_t> sequence = smooth_weighted_sequence(weights);
    EXPECT_EQ(sequence, nginx_order(weights, sequence.size())) << "round " << round;
  }
}

TEST(SmoothWeightedSequence, OnePeriodOverTheReducedWeights) {
  const std::vector<std::uint32_t> scaled{2, 4, 6}, reduced{1, 2, 3};
  EXPECT_EQ(smooth_weighted_sequence(scaled).size(), 6u);
  EXPECT_EQ(smooth_weighted_sequence(scaled), smooth_weighted_sequence(reduced));
  const std::vector<std::uint32_t> equal{256, 256, 256};
  EXPECT_EQ(smooth_weighted_sequence(equal), (std::vector<std::uint16_t>{0, 1, 2}));
  const std::vector<std::uint32_t> zeros{0, 0};
  EXPECT_TRUE(smooth_weighted_sequence(zeros).empty());
}

TEST(BackendPool, EveryPolicySplitsByWeight) {
  // 60,000 new connections over weights 1:2:3 land within 2 percentage points of 1/6, 2/6, 3/6.
  // The connections stay open, so least_connections sees the active counts grow.
  constexpr int kConnections = 60'000;
  for (auto policy : kPolicies) {
    Fixture f(3);
    auto pool = f.pool(policy, {1, 2, 3});
    std::vector<int> count(3, 0);
    std::mt19937 rng(11);
    for (int c = 0; c < kConnections; ++c) {
      net::IpAddress client = *net::IpAddress::parse("192.0.2.1");
      const std::uint32_t r = static_cast<std::uint32_t>(rng());
      std::memcpy(client.bytes.data(), &r, 4);
      const std::uint64_t hash = client_hash(client);
      const std::uint16_t b = *pool->pick(hash, {});
      ++count[b];
      pool->backend(b).stats->active.fetch_add(1);
    }
    for (int b = 0; b < 3; ++b) {
      EXPECT_NEAR(static_cast<double>(count[b]) / kConnections, (b + 1) / 6.0, 0.02)
          << to_string(policy) << " backend " << b;
    }
    std::printf("%-17s weights 1:2:3, %d connections: %.2f%% %.2f%% %.2f%%\n",
                std::string(to_string(policy)).c_str(), kConnections,
                100.0 * count[0] / kConnections, 100.0 * count[1] / kConnections,
                100.0 * count[2] / kConnections);
  }
}

TEST(BackendPool, RoundRobinIsSmooth) {
  Fixture f(3);
  auto pool = f.pool(config::BalancePolicy::round_robin, {5, 1, 1});
  std::vector<int> picks;
  for (int i = 0; i < 14; ++i) picks.push_back(*pool->pick(0, {}));
  EXPECT_EQ(picks, (std::vector<int>{0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0}));
}

TEST(BackendPool, WeightZeroNeverGetsANewConnection) {
  for (auto policy : kPolicies) {
    Fixture f(3);
    auto pool = f.pool(policy, {1, 0, 2});
    for (int c = 1; c <= 300; ++c) {
      const std::uint16_t b = *pool->pick(hash_of(c), {});
      EXPECT_NE(b, 1) << to_string(policy);
      pool->backend(b).stats->active.fetch_add(1);
    }
    // Not even as the last one left to try.
    std::vector<std::uint16_t> tried{0, 2};
    EXPECT_FALSE(pool->pick(hash_of(1), tried).has_value()) << to_string(policy);
  }
}

TEST(BackendPool, NothingWhenEveryWeightIsZero) {
  for (auto policy : kPolicies) {
    Fixture f(2);
    auto pool = f.pool(policy, {0, 0});
    EXPECT_FALSE(pool->pick(hash_of(3), {}).has_value()) << to_string(policy);
  }
}

TEST(BackendPool, LeastConnectionsComparesOpenConnectionsPerWeight) {
  Fixture f(3);
  auto pool = f.pool(config::BalancePolicy::least_connections, {1, 4, 2});
  pool->backend(0).stats->active = 2;  // 2 per unit of weight
  pool->backend(1).stats->active = 6;  // 1.5
  pool->backend(2).stats->active = 4;  // 2
  EXPECT_EQ(*pool->pick(0, {}), 1);
  pool->backend(1).stats->active = 9;  // 2.25
  EXPECT_NE(*pool->pick(0, {}), 1);
}

TEST(BackendPool, RoundRobinPassesOverADownBackend) {
  Fixture f(3);
  auto pool = f.pool(config::BalancePolicy::round_robin, {1, 2, 3});
  f.down(2);
  std::vector<int> count(3, 0);
  for (int i = 0; i < 600; ++i) ++count[*pool->pick(0, {})];
  EXPECT_EQ(count[2], 0);
  EXPECT_GT(count[0], 100);
  EXPECT_GT(count[1], 300);
}

TEST(BackendPool, ClientHashIgnoresNothingOfTheAddress) {
  EXPECT_NE(client_hash(*net::IpAddress::parse("192.0.2.1")),
            client_hash(*net::IpAddress::parse("192.0.2.2")));
  EXPECT_NE(client_hash(*net::IpAddress::parse("2001:db8::1")),
            client_hash(*net::IpAddress::parse("2001:db8::2")));
  EXPECT_EQ(client_hash(*net::IpAddress::parse("192.0.2.1")),
            client_hash(*net::IpAddress::parse("192.0.2.1")));
}

}  // namespace
}  // namespace ferry::proxy
