// TcpPlane end to end over loopback: echo services on the runtime, many connections and large
// messages byte-exact, listeners added and removed by apply(), stop closing connections, an idle
// configuration starting nothing, and the status/workers/metrics views.
#include "lib/tcp_plane/tcp_plane.hh"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lib/metrics/registry.hh"
#include "tests/unit/runtime/test_support.hh"

namespace ferry::tcp {
namespace {

using namespace std::chrono_literals;
namespace rt = ferry::runtime::testing;
using rt::metric;

config::ServiceConfig echo_service(const std::string& name, std::uint16_t port = 0) {
  config::ServiceConfig s;
  s.name = name;
  s.vip = *net::IpAddress::parse("127.0.0.1");
  s.port = port;  // 0: tests read the bound port back
  s.protocols = {.udp = false, .tcp = true};
  s.mode = config::ServiceMode::echo;
  return s;
}

config::Config echo_config(std::vector<std::string> names, std::uint32_t workers = 2) {
  config::Config c;
  c.tcp.workers = workers;
  for (const auto& n : names) c.services.push_back(echo_service(n));
  return c;
}

// Threads named like TCP workers ("tcp-N"); counting all threads would also count sanitizer
// helpers that come and go.
int worker_threads() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("tcp-", 0) == 0) ++n;
  }
  return n;
}

// Worker threads left once stop() joined them. A joined thread's /proc/self/task entry goes when
// the kernel reaps it, a moment after the join returns: await that, do not race it.
int worker_threads_after_stop() {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  int n = worker_threads();
  while (n != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
    n = worker_threads();
  }
  return n;
}

std::uint16_t port_of(const TcpPlane& plane, const std::string& service) {
  std::optional<net::Endpoint> ep = plane.bound_address(service);
  EXPECT_TRUE(ep.has_value());
  return ep ? ep->port : 0;
}

// `connections` clients over `threads` threads, each running `rounds` exchanges of the given
// sizes, then one 1-byte exchange per connection; returns the number of corrupted round trips.
// The connections stay open in `fds`. After the final 1-byte round every earlier byte has been
// given back to the buffer rings (a task releases a batch when it asks for the next one).
int run_clients(std::uint16_t port, int connections, int threads, int rounds,
                const std::vector<std::size_t>& sizes, std::uint64_t& bytes,
                std::vector<UniqueFd>& fds) {
  for (int i = 0; i < connections; ++i) fds.push_back(rt::connect_loopback(port));
  std::atomic<int> bad{0};
  std::atomic<std::uint64_t> total{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::byte> out;
      std::vector<std::byte> in;
      for (int round = 0; round < rounds; ++round) {
        for (int c = t; c < connections; c += threads) {
          const std::size_t size = sizes[static_cast<std::size_t>(round + c) % sizes.size()];
          out.resize(size);
          in.resize(size);
          const std::uint64_t offset = static_cast<std::uint64_t>(round) << 24;
          rt::fill_pattern(static_cast<std::uint64_t>(c), offset, out);
          try {
            rt::exchange(fds[c].get(), out, in);
          } catch (const std::exception&) {
            bad.fetch_add(1);
            continue;
          }
          if (rt::check_pattern(static_cast<std::uint64_t>(c), offset, in) != size)
            bad.fetch_add(1);
          total.fetch_add(size);
        }
      }
      for (int c = t; c < connections; c += threads) {
        std::byte sync[1] = {std::byte{0x5a}};
        std::byte back[1];
        try {
          rt::exchange(fds[c].get(), sync, back);
        } catch (const std::exception&) {
          bad.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  bytes = total.load();
  return bad.load();
}

TEST(TcpPlane, ConfigWithoutTcpServicesStartsNoThread) {
  metrics::Registry registry;
  TcpPlane plane(registry);
  config::Config c;
  config::ServiceConfig proxy = echo_service("dns", 53);
  proxy.mode = config::ServiceMode::proxy;  // a UDP-only proxy service is the XDP path's
  proxy.protocols = {.udp = true, .tcp = false};
  proxy.backends.push_back(*net::Endpoint::parse("10.0.1.2:53"));
  c.services.push_back(proxy);
  plane.start(c);
  EXPECT_FALSE(plane.running());
  EXPECT_EQ(worker_threads(), 0);
  EXPECT_EQ(plane.status()["workers"], 0);
  EXPECT_EQ(plane.status()["listeners"].size(), 0u);
  EXPECT_EQ(plane.workers(), nlohmann::json::array());
  plane.stop();
}

TEST(TcpPlane, EchoesManyConnectionsAndLargeMessagesByteExact) {
  metrics::Registry registry;
  TcpPlane plane(registry);
  plane.start(echo_config({"echo"}, 2));
  ASSERT_TRUE(plane.running());
  EXPECT_EQ(worker_threads(), 2);
  const std::uint16_t port = port_of(plane, "echo");
  ASSERT_NE(port, 0);

  std::uint64_t bytes = 0;
  std::vector<UniqueFd> clients;
  const int bad =
      run_clients(port, 64, 4, 6, {1, 100, 4096, 16384, 65536, 200000, 1 << 20}, bytes, clients);
  EXPECT_EQ(bad, 0);
  EXPECT_GT(bytes, 0u);

  EXPECT_EQ(metric(registry, "ferry_tcp_connections_accepted_total", {{"service", "echo"}}), 64);
  EXPECT_EQ(metric(registry, "ferry_tcp_connections_open", {{"service", "echo"}}), 64);
  // Everything but the last 1-byte round is released for sure; those 64 bytes may be too.
  const double echoed = metric(registry, "ferry_tcp_echo_bytes_total", {{"service", "echo"}});
  EXPECT_GE(echoed, static_cast<double>(bytes));
  EXPECT_LE(echoed, static_cast<double>(bytes + 64));
  EXPECT_GT(metric(registry, "ferry_runtime_tasks_run_total", {{"worker", "tcp-0"}}) +
                metric(registry, "ferry_runtime_tasks_run_total", {{"worker", "tcp-1"}}),
            0);
  EXPECT_GE(metric(registry, "ferry_uring_cqes_total", {{"worker", "tcp-1"}}), 0);
  nlohmann::json workers = plane.workers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0]["worker"], "tcp-0");
  EXPECT_TRUE(workers[1].contains("victim_inbox_attempts"));
  plane.stop();
  EXPECT_FALSE(plane.running());
  EXPECT_EQ(worker_threads_after_stop(), 0);
  EXPECT_EQ(metric(registry, "ferry_runtime_tasks_run_total", {{"worker", "tcp-0"}}), -1);
}

// A buffer ring far smaller than what is in flight: sockets park on the dry ring and resume when
// sends complete and buffers come back; nothing is lost or reordered.
TEST(TcpPlane, TinyBufferRingParksAndResumesByteExact) {
  metrics::Registry registry;
  TcpPlane plane(registry);
  config::Config c = echo_config({"echo"}, 2);
  c.tcp.buffers.count = 8;
  c.tcp.buffers.bytes = 4096;
  plane.start(c);
  std::uint64_t bytes = 0;
  std::vector<UniqueFd> clients;
  EXPECT_EQ(run_clients(port_of(plane, "echo"), 16, 4, 3, {300000, 1 << 20}, bytes, clients), 0);
  plane.stop();
}

TEST(TcpPlane, StopClosesOpenConnections) {
  metrics::Registry registry;
  TcpPlane plane(registry);
  plane.start(echo_config({"echo"}, 2));
  const std::uint16_t port = port_of(plane, "echo");
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(rt::connect_loopback(port));
  std::byte one[1] = {std::byte{7}};
  std::byte back[1];
  for (auto& fd : idle) rt::exchange(fd.get(), one, back);  // all accepted and served
  EXPECT_EQ(metric(registry, "ferry_tcp_connections_open", {{"service", "echo"}}), 8);
  EXPECT_EQ(plane.status()["connections"], 8);
  plane.stop();
  for (auto& fd : idle) {
    char buf[16];
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n;
  }
  EXPECT_THROW(rt::connect_loopback(port), std::system_error);
}

TEST(TcpPlane, ApplyAddsAndRemovesListenersAndReportsRestarts) {
  metrics::Registry registry;
  TcpPlane plane(registry);
  plane.start(echo_config({"a"}, 2));
  const std::uint16_t port_a = port_of(plane, "a");
  UniqueFd on_a = rt::connect_loopback(port_a);
  std::byte ping[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  std::byte pong[3];
  rt::exchange(on_a.get(), ping, pong);

  TcpApplyResult added = plane.apply(echo_config({"a", "b"}, 2));
  EXPECT_EQ(added.added, std::vector<std::string>{"b"});
  EXPECT_TRUE(added.removed.empty());
  EXPECT_TRUE(added.restart_required.empty());
  const std::uint16_t port_b = port_of(plane, "b");
  UniqueFd on_b = rt::connect_loopback(port_b);
  rt::exchange(on_b.get(), ping, pong);
  EXPECT_EQ(port_of(plane, "a"), port_a);  // kept as it was

  TcpApplyResult removed = plane.apply(echo_config({"b"}, 4));
  EXPECT_EQ(removed.removed, std::vector<std::string>{"a"});
  ASSERT_EQ(removed.restart_required.size(), 1u);
  EXPECT_NE(removed.restart_required[0].find("tcp.workers 2 -> 4"), std::string::npos);
  EXPECT_EQ(plane.status()["workers"], 2);  // not applied without a restart
  EXPECT_THROW(rt::connect_loopback(port_a), std::system_error);
  char buf[8];
  const ssize_t n = ::read(on_a.get(), buf, sizeof(buf));  // a's connections were closed
  EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n;
  rt::exchange(on_b.get(), ping, pong);  // b untouched
  EXPECT_EQ(plane.listeners().size(), 1u);

  TcpApplyResult none = plane.apply(config::Config{});
  EXPECT_TRUE(none.stopped);
  EXPECT_FALSE(plane.running());
  TcpApplyResult again = plane.apply(echo_config({"c"}, 1));
  EXPECT_TRUE(again.started);
  EXPECT_EQ(plane.status()["workers"], 1);
  UniqueFd on_c = rt::connect_loopback(port_of(plane, "c"));
  rt::exchange(on_c.get(), ping, pong);
  EXPECT_EQ(std::memcmp(ping, pong, sizeof(ping)), 0);
}

TEST(TcpPlane, ApplyReportsAServiceThatCannotListen) {
  metrics::Registry registry;
  TcpPlane plane(registry);
  plane.start(echo_config({"a"}, 1));
  // A plain listener holds a port; b wants the same one.
  UniqueFd squatter = open_listener(*net::Endpoint::parse("127.0.0.1:0"), /*reuseport=*/false);
  const std::uint16_t taken = bound_endpoint(squatter.get()).port;
  config::Config c = echo_config({"a"}, 1);
  c.services.push_back(echo_service("b", taken));
  TcpApplyResult r = plane.apply(c);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("service b"), std::string::npos) << r.errors[0];
  EXPECT_NE(r.errors[0].find("Address already in use"), std::string::npos) << r.errors[0];
  EXPECT_TRUE(plane.running());
  EXPECT_EQ(plane.listeners().size(), 1u);
}

TEST(TcpPlane, StatusShowsModesFeaturesAndListeners) {
  metrics::Registry registry;
  TcpPlane plane(registry);
  config::Config c = echo_config({"echo"}, 2);
  c.tcp.scheduler.io_ready = config::IoReadyMode::index;
  plane.start(c);
  nlohmann::json s = plane.status();
  EXPECT_EQ(s["running"], true);
  EXPECT_EQ(s["workers"], 2);
  EXPECT_TRUE(s["io_ready"] == "index" || std::getenv("FERRY_TASK_GLOBAL_IO_READY") != nullptr)
      << s.dump();
  EXPECT_TRUE(s["features"].contains("bundle"));
  // This kernel (6.18) grants DEFER_TASKRUN; the forced fallback runs without it.
  EXPECT_EQ(s["defer_taskrun"], std::getenv("FERRY_URING_NO_DEFER_TASKRUN") == nullptr) << s.dump();
  ASSERT_EQ(s["listeners"].size(), 1u);
  EXPECT_EQ(s["listeners"][0]["service"], "echo");
  EXPECT_EQ(s["listeners"][0]["address"], "127.0.0.1:" + std::to_string(port_of(plane, "echo")));
  EXPECT_EQ(metric(registry, "ferry_uring_feature", {{"feature", "multishot_accept"}}), 1);
}

TEST(TcpPlane, EveryWorkerBeatsItsHeartbeat) {
  metrics::Registry registry;
  std::mutex mutex;
  std::set<std::string> enrolled;
  rt::Countdown beaten(3);
  std::set<std::string> beat_once;
  TcpPlane plane(registry, [&](const std::string& name) -> std::function<void()> {
    std::lock_guard lock(mutex);
    enrolled.insert(name);
    return [&, name] {
      std::lock_guard lock(mutex);
      if (beat_once.insert(name).second) beaten.count();
    };
  });
  plane.start(echo_config({"echo"}, 3));
  EXPECT_TRUE(beaten.wait_for(5s));  // idle workers beat too (they park with a timeout)
  std::lock_guard lock(mutex);
  EXPECT_EQ(enrolled, (std::set<std::string>{"tcp-0", "tcp-1", "tcp-2"}));
}

}  // namespace
}  // namespace ferry::tcp
