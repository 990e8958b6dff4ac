// HealthChecker against real loopback sockets: a listening port stays up, a bound port that does
// not listen goes down after exactly `fall` checks and comes back after exactly `rise` once it
// listens, a full accept queue times out, and reconfiguring keeps or releases backends.
#include "lib/health/health_checker.hh"
#include "lib/health/health_report.hh"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "tests/unit/health/eventually.hh"

namespace ferry::health {
namespace {

using namespace std::chrono_literals;

// A TCP socket bound to the loopback address (127.0.0.1, or ::1) on a kernel-chosen port;
// listens only when told to.
class LoopbackPort {
 public:
  explicit LoopbackPort(const char* address = "127.0.0.1:0") {
    net::Endpoint want = *net::Endpoint::parse(address);
    sockaddr_storage addr{};
    socklen_t len = want.to_sockaddr(addr);
    fd_.reset(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
    len = sizeof(addr);
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    endpoint_ = *net::Endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&addr), len);
  }
  void listen(int backlog = 128) { ASSERT_EQ(::listen(fd_.get(), backlog), 0); }
  const net::Endpoint& endpoint() const { return endpoint_; }

 private:
  UniqueFd fd_;
  net::Endpoint endpoint_;
};

using test::eventually;

config::HealthCheckConfig params(std::uint32_t interval_ms, std::uint32_t timeout_ms,
                                 std::uint32_t rise, std::uint32_t fall) {
  config::HealthCheckConfig p;
  p.interval_ms = interval_ms;
  p.timeout_ms = timeout_ms;
  p.rise = rise;
  p.fall = fall;
  return p;
}

std::optional<BackendHealth> view_of(const HealthChecker& checker, const net::Endpoint& backend) {
  for (auto& h : checker.snapshot()) {
    if (h.backend == backend) return h;
  }
  return std::nullopt;
}

std::uint64_t checks(const HealthChecker& checker, const net::Endpoint& backend, CheckResult r) {
  auto v = view_of(checker, backend);
  return v ? v->checks[static_cast<std::size_t>(r)] : 0;
}

// What a listener heard, with the checker's view of the backend just before the transition.
struct Heard {
  bool up;
  BackendHealth before;
};

class Recorder {
 public:
  void attach(HealthBoard& board, const HealthChecker& checker) {
    board.subscribe([this, &checker](const std::string&, const net::Endpoint& b, bool up) {
      auto before = view_of(checker, b);
      std::lock_guard lock(mutex_);
      heard_.push_back({up, before.value_or(BackendHealth{})});
    });
  }
  std::vector<Heard> heard() const {
    std::lock_guard lock(mutex_);
    return heard_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Heard> heard_;
};

TEST(HealthChecker, ListeningBackendStaysUpAndCountsOkChecks) {
  LoopbackPort port;
  port.listen();
  HealthBoard board;
  HealthChecker checker(board);
  Recorder recorder;
  recorder.attach(board, checker);
  checker.set_targets({{"web", port.endpoint(), params(20, 15, 2, 3), {}}});
  checker.start();
  ASSERT_TRUE(eventually([&] { return checks(checker, port.endpoint(), CheckResult::ok) >= 5; }));
  checker.stop();
  auto v = view_of(checker, port.endpoint());
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->up);
  EXPECT_EQ(v->consecutive_failures, 0u);
  EXPECT_GE(v->consecutive_successes, 5u);
  EXPECT_FALSE(v->last_error);
  EXPECT_GT(v->last_connect_ms, 0.0);
  EXPECT_TRUE(board.state("web", port.endpoint())->checked.load());
  EXPECT_TRUE(board.state("web", port.endpoint())->up.load());
  EXPECT_TRUE(recorder.heard().empty());
}

TEST(HealthChecker, ClosedPortGoesDownAfterExactlyFallChecksAndUpAfterExactlyRise) {
  LoopbackPort port;  // bound, not listening: connects are refused
  HealthBoard board;
  HealthChecker checker(board);
  Recorder recorder;
  recorder.attach(board, checker);
  auto flag = board.state("web", port.endpoint());
  checker.set_targets({{"web", port.endpoint(), params(20, 15, 2, 3), {}}});
  checker.start();
  // The board flips the flag before it calls its listeners: await what is checked, the listener.
  ASSERT_TRUE(eventually([&] { return !recorder.heard().empty(); }));
  EXPECT_FALSE(flag->up.load());
  auto heard = recorder.heard();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_FALSE(heard[0].up);
  // The transition came with the third failure: just before it, two had failed and it was up.
  EXPECT_TRUE(heard[0].before.up);
  EXPECT_EQ(heard[0].before.consecutive_failures, 2u);
  EXPECT_EQ(heard[0].before.checks[static_cast<std::size_t>(CheckResult::refused)], 2u);
  ASSERT_TRUE(eventually([&] {
    auto v = view_of(checker, port.endpoint());
    return v && v->went_down == 1;
  }));
  auto down = *view_of(checker, port.endpoint());
  EXPECT_FALSE(down.up);
  EXPECT_EQ(down.last_error, "connection refused");
  EXPECT_EQ(down.checks[static_cast<std::size_t>(CheckResult::ok)], 0u);

  port.listen();
  ASSERT_TRUE(eventually([&] { return recorder.heard().size() >= 2; }));
  EXPECT_TRUE(flag->up.load());
  heard = recorder.heard();
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_TRUE(heard[1].up);
  EXPECT_FALSE(heard[1].before.up);
  EXPECT_EQ(heard[1].before.consecutive_successes, 1u);
  // Further checks keep it up and call no listener again.
  auto ok_now = checks(checker, port.endpoint(), CheckResult::ok);
  ASSERT_TRUE(eventually([&] { return checks(checker, port.endpoint(), CheckResult::ok) >= ok_now + 3; }));
  checker.stop();
  EXPECT_EQ(recorder.heard().size(), 2u);
  auto v = *view_of(checker, port.endpoint());
  EXPECT_EQ(v.went_down, 1u);
  EXPECT_EQ(v.went_up, 1u);
  EXPECT_EQ(v.last_error, "connection refused");  // kept after recovery, for the operator
}

// Listens with backlog 0 and fills its accept queue (one connection, never accepted): the kernel
// then drops further SYNs, so a connect hangs until its timeout. Returns the filling client.
UniqueFd fill_accept_queue(LoopbackPort& port) {
  port.listen(0);
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage addr{};
  socklen_t len = port.endpoint().to_sockaddr(addr);
  EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  return client;
}

TEST(HealthChecker, ChecksIpv6BackendsToo) {
  LoopbackPort alive("[::1]:0");
  alive.listen();
  LoopbackPort dead("[::1]:0");
  HealthBoard board;
  HealthChecker checker(board);
  checker.set_targets({{"web6", alive.endpoint(), params(20, 15, 1, 1), {}},
                       {"web6", dead.endpoint(), params(20, 15, 1, 1), {}}});
  checker.start();
  auto dead_flag = board.state("web6", dead.endpoint());
  ASSERT_TRUE(eventually([&] { return !dead_flag->up.load(); }));
  ASSERT_TRUE(eventually([&] { return checks(checker, alive.endpoint(), CheckResult::ok) >= 2; }));
  checker.stop();
  EXPECT_TRUE(board.state("web6", alive.endpoint())->up.load());
  EXPECT_EQ(view_of(checker, dead.endpoint())->last_error, "connection refused");
}

TEST(HealthChecker, FullAcceptQueueTimesOut) {
  LoopbackPort port;
  UniqueFd filler = fill_accept_queue(port);
  HealthBoard board;
  HealthChecker checker(board);
  checker.set_targets({{"web", port.endpoint(), params(50, 30, 1, 1), {}}});
  checker.start();
  auto flag = board.state("web", port.endpoint());
  ASSERT_TRUE(eventually([&] { return !flag->up.load(); }));
  ASSERT_TRUE(eventually([&] { return checks(checker, port.endpoint(), CheckResult::timeout) >= 1; }));
  checker.stop();
  auto v = *view_of(checker, port.endpoint());
  EXPECT_EQ(v.last_error, "connect timeout after 30 ms");
  EXPECT_EQ(v.checks[static_cast<std::size_t>(CheckResult::ok)], 0u);
}

std::size_t open_fds() {
  std::size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

TEST(HealthChecker, StopClosesChecksInFlight) {
  LoopbackPort port;
  UniqueFd filler = fill_accept_queue(port);
  std::size_t before = open_fds();
  {
    HealthBoard board;
    HealthChecker checker(board);
    // Long timeout: the first check is still in flight when the checker stops.
    checker.set_targets({{"web", port.endpoint(), params(10, 5000 - 1, 1, 1), {}}});
    EXPECT_EQ(open_fds(), before + 2);  // epoll and eventfd
    checker.start();
    ASSERT_TRUE(eventually([&] { return open_fds() == before + 3; }));  // the check's socket
    checker.stop();
    EXPECT_EQ(open_fds(), before + 2);
  }
  EXPECT_EQ(open_fds(), before);
}

TEST(HealthChecker, SetTargetsKeepsStayingBackendsAndReleasesDroppedOnes) {
  LoopbackPort alive;
  alive.listen();
  LoopbackPort dead;
  HealthBoard board;
  HealthChecker checker(board);
  checker.start();
  checker.set_targets({{"web", alive.endpoint(), params(20, 15, 1, 1), {}},
                       {"web", dead.endpoint(), params(20, 15, 1, 1), {}}});
  auto dead_flag = board.state("web", dead.endpoint());
  ASSERT_TRUE(eventually([&] { return !dead_flag->up.load(); }));
  ASSERT_TRUE(eventually([&] { return checks(checker, alive.endpoint(), CheckResult::ok) >= 2; }));
  auto ok_before = checks(checker, alive.endpoint(), CheckResult::ok);

  // The dead backend's checks are removed (the service keeps it, now unchecked): it serves again.
  checker.set_targets({{"web", alive.endpoint(), params(30, 15, 1, 1), {}}});
  EXPECT_TRUE(dead_flag->up.load());
  EXPECT_FALSE(dead_flag->checked.load());
  EXPECT_FALSE(view_of(checker, dead.endpoint()));
  EXPECT_GE(checks(checker, alive.endpoint(), CheckResult::ok), ok_before);  // counters kept
  ASSERT_TRUE(eventually([&] { return checks(checker, alive.endpoint(), CheckResult::ok) >= ok_before + 2; }));
  checker.set_targets({});
  EXPECT_TRUE(checker.snapshot().empty());
  EXPECT_FALSE(board.state("web", alive.endpoint())->checked.load());
}

TEST(HealthReport, ShowsStatesStreaksAndMetricsOfCheckedAndUncheckedBackends) {
  LoopbackPort dead;
  HealthBoard board;
  board.state("dns", *net::Endpoint::parse("10.0.0.9:53"));  // configured, unchecked
  HealthChecker checker(board);
  checker.set_targets({{"web", dead.endpoint(), params(20, 15, 1, 1), {}}});
  checker.start();
  ASSERT_TRUE(eventually([&] { auto v = view_of(checker, dead.endpoint()); return v && v->went_down == 1; }));
  checker.stop();
  metrics::Registry registry;
  auto handle = registry.add([&](metrics::SnapshotBuilder& out) { collect_health(board, &checker, out); });
  std::map<std::string, double> values;
  for (const auto& family : registry.snapshot()) {
    for (const auto& s : family.samples) {
      std::string key = family.name;
      for (const auto& [k, v] : s.labels) key += "," + k + "=" + v;
      values[key] = s.value;
    }
  }
  std::string web = "service=web,backend=" + dead.endpoint().to_string();
  EXPECT_EQ(values.at("ferry_backend_up,service=dns,backend=10.0.0.9:53"), 1);
  EXPECT_EQ(values.at("ferry_backend_up," + web), 0);
  EXPECT_GE(values.at("ferry_health_checks_total," + web + ",result=refused"), 1);
  EXPECT_EQ(values.at("ferry_health_checks_total," + web + ",result=ok"), 0);
  EXPECT_EQ(values.at("ferry_health_transitions_total," + web + ",to=down"), 1);
  EXPECT_EQ(values.at("ferry_health_transitions_total," + web + ",to=up"), 0);

  auto status = health_status(board, &checker);
  EXPECT_EQ(status["checked"], 1);
  EXPECT_EQ(status["down"], 1);
  ASSERT_EQ(status["backends"].size(), 2u);
  const auto& dns = status["backends"][0];
  EXPECT_EQ(dns["service"], "dns");
  EXPECT_EQ(dns["state"], "unknown");
  EXPECT_EQ(dns["checked"], false);
  EXPECT_EQ(dns["up"], true);
  const auto& down = status["backends"][1];
  EXPECT_EQ(down["address"], dead.endpoint().to_string());
  EXPECT_EQ(down["state"], "down");
  EXPECT_EQ(down["checked"], true);
  EXPECT_EQ(down["up"], false);
  EXPECT_GE(down["consecutive_failures"].get<int>(), 1);
  EXPECT_EQ(down["last_error"], "connection refused");
  EXPECT_GE(down["checks"]["refused"].get<int>(), 1);
}

TEST(HealthReport, ATunneledBackendShowsTheVipItsChecksGoToAndItsMark) {
  HealthBoard board;
  HealthChecker checker(board);  // not started: nothing is checked, the views are set
  net::Endpoint backend = *net::Endpoint::parse("10.0.1.7:80");
  config::HealthCheckConfig tunneled = params(1000, 500, 1, 1);
  tunneled.port = 8080;
  checker.set_targets({{"web", backend, tunneled,
                        TunnelRoute{0x66650002, *net::IpAddress::parse("192.0.2.10")}},
                       {"plain", backend, params(1000, 500, 1, 1), {}}});
  auto status = health_status(board, &checker);
  ASSERT_EQ(status["backends"].size(), 2u);
  const auto& plain = status["backends"][0];
  EXPECT_EQ(plain["check_target"], "10.0.1.7:80");
  EXPECT_TRUE(plain["tunnel_mark"].is_null());
  const auto& web = status["backends"][1];
  EXPECT_EQ(web["check_target"], "192.0.2.10:8080");
  EXPECT_EQ(web["tunnel_mark"], 0x66650002);
}

TEST(HealthChecks, TargetsAreTheBackendsOfProxyServicesWithHealth) {
  config::ServiceConfig dns;
  dns.name = "dns";
  dns.backends = {*net::Endpoint::parse("10.0.0.1:53"), *net::Endpoint::parse("10.0.0.2:53")};
  dns.health = params(1000, 500, 2, 3);
  config::ServiceConfig plain = dns;
  plain.name = "plain";
  plain.health.reset();
  config::ServiceConfig reflect;
  reflect.name = "mirror";
  reflect.mode = config::ServiceMode::reflect;
  reflect.health = params(1000, 500, 2, 3);
  std::vector<config::ServiceConfig> services{dns, plain, reflect};
  auto targets = check_targets(services);
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].service, "dns");
  EXPECT_EQ(targets[1].backend.to_string(), "10.0.0.2:53");
  EXPECT_EQ(configured_backends(services).size(), 4u);
}

}  // namespace
}  // namespace ferry::health
