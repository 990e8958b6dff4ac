// Backend choice of the TCP proxy: every balance policy, down and already tried backends
// skipped, least connections following the open counts, maglev stable per client address.
#include "lib/proxy/backend_pool.hh"

#include <gtest/gtest.h>

#include <map>
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
  std::shared_ptr<BackendPool> pool(config::BalancePolicy policy) {
    std::vector<Backend> backends;
    for (const auto& e : endpoints) {
      Backend b;
      b.endpoint = e;
      b.name = e.to_string();
      b.address_len = e.to_sockaddr(b.address);
      b.health = board.state("web", e);
      b.stats = std::make_shared<BackendStats>();
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
