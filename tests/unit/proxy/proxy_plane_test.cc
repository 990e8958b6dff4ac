// The TCP proxy end to end over loopback: TcpPlane with a proxy service in front of test
// backends (threads on 127.0.0.1 / ::1, port 0): byte-exact forwarding both ways, half-close,
// RST both ways, connect refused -> retry, no backend -> failed, idle timeout, backpressure
// holding at most the cap, connection limits, reload keeping established connections, drain.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lib/health/health_board.hh"
#include "lib/metrics/registry.hh"
#include "lib/proxy/proxy_service.hh"
#include "lib/tcp/listener_socket.hh"
#include "lib/tcp_plane/tcp_plane.hh"
#include "tests/unit/runtime/test_support.hh"

namespace ferry::proxy {
namespace {

using namespace std::chrono_literals;
namespace rt = ferry::runtime::testing;
using rt::metric;

// A backend: a listening socket and one thread per accepted connection running `handler`.
class TestBackend {
 public:
  using Handler = std::function<void(int fd)>;
  explicit TestBackend(Handler handler, const char* address = "127.0.0.1")
      : handler_(std::move(handler)) {
    net::Endpoint at{*net::IpAddress::parse(address), 0};
    listen_ = tcp::open_listener(at, false);
    endpoint_ = tcp::bound_endpoint(listen_.get());
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~TestBackend() { stop(); }

  void stop() {
    if (stopped_.exchange(true)) return;
    ::shutdown(listen_.get(), SHUT_RDWR);
    acceptor_.join();
    std::lock_guard lock(mutex_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : threads_) t.join();
    for (int fd : fds_) ::close(fd);
  }
  const net::Endpoint& endpoint() const { return endpoint_; }
  int accepted() const { return accepted_.load(); }

 private:
  void accept_loop() {
    for (;;) {
      pollfd p{listen_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) < 0 || stopped_.load()) return;
      if ((p.revents & POLLIN) == 0) continue;
      int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      // Blocking I/O in the handlers.
      int fl = ::fcntl(fd, F_GETFL);
      ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
      accepted_.fetch_add(1);
      std::lock_guard lock(mutex_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { handler_(fd); });
    }
  }

  Handler handler_;
  UniqueFd listen_;
  net::Endpoint endpoint_;
  std::thread acceptor_;
  std::atomic<bool> stopped_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

void echo_handler(int fd) {
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    try {
      rt::write_all(fd, std::as_bytes(std::span(buf.data(), static_cast<std::size_t>(n))));
    } catch (const std::exception&) {
      break;
    }
  }
  ::shutdown(fd, SHUT_WR);
}

void set_linger_zero(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

// Reads until EOF or error: the bytes read and the errno (0 on EOF). Gives up after `timeout`.
std::pair<std::uint64_t, int> drain_socket(int fd, std::chrono::milliseconds timeout = 5s) {
  std::uint64_t total = 0;
  char buf[65536];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {total, ETIMEDOUT};
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return {total, 0};
    if (n < 0) return {total, errno};
    total += static_cast<std::uint64_t>(n);
  }
}

UniqueFd connect_to(const net::Endpoint& at) {
  UniqueFd fd(::socket(at.address.is_v4() ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage ss{};
  socklen_t len = at.to_sockaddr(ss);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    throw std::system_error(errno, std::generic_category(), "connect " + at.to_string());
  }
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Polls `pred` until true or 5 s passed (for counters that settle after the sockets did).
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

config::ServiceConfig proxy_service(std::vector<net::Endpoint> backends,
                                    config::BalancePolicy balance, const char* vip = "127.0.0.1") {
  config::ServiceConfig s;
  s.name = "web";
  s.vip = *net::IpAddress::parse(vip);
  s.port = 0;
  s.protocols = {.udp = false, .tcp = true};
  s.mode = config::ServiceMode::proxy;
  s.backends = std::move(backends);
  s.balance = balance;
  return s;
}

struct Proxy {
  metrics::Registry registry;
  health::HealthBoard board;
  config::Config config;
  tcp::TcpPlane plane{registry, {}, &board};

  explicit Proxy(std::vector<net::Endpoint> backends,
                 config::BalancePolicy balance = config::BalancePolicy::round_robin,
                 const char* vip = "127.0.0.1") {
    config.tcp.workers = 2;
    config.services.push_back(proxy_service(std::move(backends), balance, vip));
  }
  void start() { plane.start(config); }
  net::Endpoint address() const { return *plane.bound_address("web"); }
  double get(const std::string& name, metrics::Labels labels = {}) {
    labels.emplace_back("service", "web");
    return metric(registry, name, labels);
  }
};

TEST(ProxyPlane, ForwardsBytesExactBothDirections) {
  TestBackend backend(echo_handler);
  Proxy proxy({backend.endpoint()});
  proxy.start();
  const net::Endpoint at = proxy.address();
  constexpr int kConnections = 16;
  constexpr int kThreads = 4;
  std::vector<UniqueFd> fds;
  for (int i = 0; i < kConnections; ++i) fds.push_back(connect_to(at));
  std::atomic<int> bad{0};
  std::atomic<std::uint64_t> bytes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7919 + 1);
      std::uniform_int_distribution<std::size_t> size_of(1, 1 << 20);
      std::vector<std::byte> out;
      std::vector<std::byte> in;
      for (int round = 0; round < 6; ++round) {
        for (int c = t; c < kConnections; c += kThreads) {
          std::size_t size = size_of(rng);
          if (round == 0) size = 1;
          if (round == 1) size = 65536;
          if (round == 2) size = 1 << 20;
          out.resize(size);
          in.resize(size);
          const std::uint64_t offset = static_cast<std::uint64_t>(round) << 32;
          rt::fill_pattern(static_cast<std::uint64_t>(c), offset, out);
          try {
            rt::exchange(fds[static_cast<std::size_t>(c)].get(), out, in);
          } catch (const std::exception&) {
            bad.fetch_add(1);
            continue;
          }
          if (rt::check_pattern(static_cast<std::uint64_t>(c), offset, in) != size)
            bad.fetch_add(1);
          bytes.fetch_add(size);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  fds.clear();
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_active") == 0; }));
  EXPECT_EQ(proxy.get("ferry_proxy_bytes_in_total"), static_cast<double>(bytes.load()));
  EXPECT_EQ(proxy.get("ferry_proxy_bytes_out_total"), static_cast<double>(bytes.load()));
  EXPECT_EQ(proxy.get("ferry_proxy_connections_total"), kConnections);
  EXPECT_EQ(proxy.get("ferry_proxy_backend_connections_total"), kConnections);
  EXPECT_EQ(proxy.get("ferry_proxy_resets_total"), 0);
  EXPECT_EQ(metric(proxy.registry, "ferry_uring_stitched_bytes_total"), 0);
}

TEST(ProxyPlane, ForwardsOverIpv6) {
  TestBackend backend(echo_handler, "::1");
  Proxy proxy({backend.endpoint()}, config::BalancePolicy::maglev, "::1");
  proxy.start();
  UniqueFd c = connect_to(proxy.address());
  std::vector<std::byte> out(100000), in(100000);
  rt::fill_pattern(3, 0, out);
  rt::exchange(c.get(), out, in);
  EXPECT_EQ(rt::check_pattern(3, 0, in), in.size());
}

TEST(ProxyPlane, HalfCloseReachesTheBackendAndTheAnswerStillComes) {
  // The backend reads until EOF, then answers with the byte count and closes.
  TestBackend backend([](int fd) {
    auto [bytes, error] = drain_socket(fd);
    if (error == 0) {
      rt::write_all(fd, std::as_bytes(std::span(&bytes, 1)));
    }
    ::shutdown(fd, SHUT_WR);
  });
  Proxy proxy({backend.endpoint()});
  proxy.start();
  UniqueFd c = connect_to(proxy.address());
  std::vector<std::byte> out(300000);
  rt::fill_pattern(1, 0, out);
  rt::write_all(c.get(), out);
  ASSERT_EQ(::shutdown(c.get(), SHUT_WR), 0);
  std::uint64_t answer = 0;
  rt::read_exact(c.get(), std::as_writable_bytes(std::span(&answer, 1)));
  EXPECT_EQ(answer, out.size());
  auto [rest, error] = drain_socket(c.get());
  EXPECT_EQ(rest, 0u);
  EXPECT_EQ(error, 0);  // a clean EOF, not a reset
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_active") == 0; }));
  EXPECT_EQ(proxy.get("ferry_proxy_resets_total"), 0);
}

TEST(ProxyPlane, BackendResetReachesTheClientAsReset) {
  TestBackend backend([](int fd) {
    char b;
    if (::read(fd, &b, 1) == 1) abort_socket(fd);  // RST now; the fd is closed at stop()
  });
  Proxy proxy({backend.endpoint()});
  proxy.start();
  UniqueFd c = connect_to(proxy.address());
  const char one = 'x';
  ASSERT_EQ(::write(c.get(), &one, 1), 1);
  auto [bytes, error] = drain_socket(c.get());
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_active") == 0; }));
  EXPECT_EQ(proxy.get("ferry_proxy_resets_total"), 1);
}

TEST(ProxyPlane, ClientResetReachesTheBackendAsReset) {
  std::atomic<int> backend_error{-1};
  rt::Countdown done(1);
  TestBackend backend([&](int fd) {
    auto [bytes, error] = drain_socket(fd);
    backend_error = error;
    done.count();
  });
  Proxy proxy({backend.endpoint()});
  proxy.start();
  UniqueFd c = connect_to(proxy.address());
  const char one = 'x';
  ASSERT_EQ(::write(c.get(), &one, 1), 1);
  ASSERT_TRUE(eventually([&] { return proxy.get("ferry_proxy_backend_bytes_in_total") == 1; }));
  set_linger_zero(c.get());
  c.reset();  // RST
  ASSERT_TRUE(done.wait_for(5s));
  EXPECT_EQ(backend_error.load(), ECONNRESET);
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_active") == 0; }));
}

TEST(ProxyPlane, ConnectRefusedRetriesAnotherBackend) {
  TestBackend live(echo_handler);
  // A port nothing listens on: bind a socket, read its port, close it.
  net::Endpoint dead;
  {
    UniqueFd tmp = tcp::open_listener({*net::IpAddress::parse("127.0.0.1"), 0}, false);
    dead = tcp::bound_endpoint(tmp.get());
  }
  Proxy proxy({dead, live.endpoint()});
  proxy.start();
  for (int i = 0; i < 6; ++i) {
    UniqueFd c = connect_to(proxy.address());
    std::vector<std::byte> out(1000), in(1000);
    rt::fill_pattern(static_cast<std::uint64_t>(i), 0, out);
    rt::exchange(c.get(), out, in);
    EXPECT_EQ(rt::check_pattern(static_cast<std::uint64_t>(i), 0, in), in.size());
  }
  EXPECT_EQ(live.accepted(), 6);
  // Round robin starts every other connection on the dead backend.
  EXPECT_EQ(proxy.get("ferry_proxy_retries_total"), 3);
  EXPECT_EQ(
      proxy.get("ferry_proxy_backend_connect_failures_total", {{"backend", dead.to_string()}}), 3);
  EXPECT_EQ(proxy.get("ferry_proxy_connections_failed_total"), 0);
}

TEST(ProxyPlane, NoHealthyBackendResetsTheClientAndCountsFailed) {
  TestBackend live(echo_handler);
  Proxy proxy({live.endpoint()});
  proxy.start();
  proxy.board.set_up("web", live.endpoint(), false);
  EXPECT_EQ(proxy.get("ferry_proxy_backend_up"), 0);
  UniqueFd c = connect_to(proxy.address());
  auto [bytes, error] = drain_socket(c.get());
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_failed_total") == 1; }));
  EXPECT_EQ(live.accepted(), 0);
  proxy.board.set_up("web", live.endpoint(), true);
  UniqueFd again = connect_to(proxy.address());
  std::vector<std::byte> out(10), in(10);
  rt::exchange(again.get(), out, in);
  EXPECT_EQ(live.accepted(), 1);
}

TEST(ProxyPlane, ConnectTimeoutCountsAsAFailedAttempt) {
  // 192.0.2.1 (TEST-NET-1) is unrouted here: the connect either times out or fails unreachable.
  TestBackend live(echo_handler);
  Proxy proxy({*net::Endpoint::parse("192.0.2.1:9"), live.endpoint()});
  proxy.config.tcp.proxy.connect_timeout_ms = 100;
  proxy.start();
  for (int i = 0; i < 2; ++i) {
    UniqueFd c = connect_to(proxy.address());
    std::vector<std::byte> out(10), in(10);
    rt::exchange(c.get(), out, in);
  }
  EXPECT_EQ(proxy.get("ferry_proxy_retries_total"), 1);
  EXPECT_EQ(proxy.get("ferry_proxy_backend_connect_failures_total", {{"backend", "192.0.2.1:9"}}),
            1);
}

TEST(ProxyPlane, IdleTimeoutResetsBothSides) {
  std::atomic<int> backend_error{-1};
  rt::Countdown done(1);
  TestBackend backend([&](int fd) {
    char b;
    if (::read(fd, &b, 1) == 1) rt::write_all(fd, std::as_bytes(std::span(&b, 1)));
    auto [bytes, error] = drain_socket(fd);
    backend_error = error;
    done.count();
  });
  Proxy proxy({backend.endpoint()});
  proxy.config.tcp.proxy.idle_timeout_ms = 150;
  proxy.start();
  UniqueFd c = connect_to(proxy.address());
  std::byte one[1] = {std::byte{7}}, back[1];
  rt::exchange(c.get(), one, back);
  const auto t0 = std::chrono::steady_clock::now();
  auto [bytes, error] = drain_socket(c.get());
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 2s);
  ASSERT_TRUE(done.wait_for(5s));
  EXPECT_EQ(backend_error.load(), ECONNRESET);
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_idle_timeouts_total") == 1; }));
}

TEST(ProxyPlane, BackpressureHoldsAtMostTheCapAndOthersKeepGoing) {
  constexpr std::size_t kStreamBytes = 16 << 20;
  TestBackend streamer([](int fd) {
    char cmd;
    if (::read(fd, &cmd, 1) != 1) return;
    if (cmd == 's') {
      std::vector<std::byte> chunk(1 << 16);
      for (std::size_t off = 0; off < kStreamBytes; off += chunk.size()) {
        rt::fill_pattern(9, off, chunk);
        try {
          rt::write_all(fd, chunk);
        } catch (const std::exception&) {
          return;
        }
      }
      ::shutdown(fd, SHUT_WR);
      drain_socket(fd, 30s);
      return;
    }
    echo_handler(fd);
  });
  Proxy proxy({streamer.endpoint()});
  proxy.config.tcp.workers = 1;  // one buffer ring: the slow reader and the fast one share it
  proxy.config.tcp.proxy.high_water_bytes = 65536;
  proxy.config.tcp.proxy.low_water_bytes = 16384;
  proxy.start();
  UniqueFd slow = connect_to(proxy.address());
  const char s = 's';
  ASSERT_EQ(::write(slow.get(), &s, 1), 1);
  // Nobody reads `slow`: the kernel buffers fill, then the proxy must stop receiving.
  std::this_thread::sleep_for(500ms);
  const double buffer_bytes = 16384;
  const double held = metric(proxy.registry, "ferry_uring_buffer_ring_held") * buffer_bytes;
  const double ring = metric(proxy.registry, "ferry_uring_buffer_ring_buffers") * buffer_bytes;
  EXPECT_GT(proxy.get("ferry_proxy_bytes_out_total"), 0);
  std::printf("slow reader: %.0f of %.0f ring bytes held, %.0f bytes forwarded so far\n", held,
              ring, proxy.get("ferry_proxy_bytes_out_total"));
  // Without the pause the stalled direction takes the whole ring (as it did before it existed).
  EXPECT_LT(held, ring / 2);

  // Another connection on the same worker runs at full speed meanwhile.
  UniqueFd fast = connect_to(proxy.address());
  const char e = 'e';
  ASSERT_EQ(::write(fast.get(), &e, 1), 1);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::byte> out(1 << 16), in(1 << 16);
  for (int i = 0; i < 64; ++i) {
    rt::fill_pattern(static_cast<std::uint64_t>(i), 0, out);
    rt::exchange(fast.get(), out, in, 5s);
    ASSERT_EQ(rt::check_pattern(static_cast<std::uint64_t>(i), 0, in), in.size());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);

  // The slow reader finally reads: every byte arrives, in order, and nothing was lost.
  std::vector<std::byte> got(kStreamBytes);
  rt::read_exact(slow.get(), got);
  EXPECT_EQ(rt::check_pattern(9, 0, got), got.size());
  auto [rest, error] = drain_socket(slow.get());
  EXPECT_EQ(rest, 0u);
  EXPECT_EQ(error, 0);
  // The peak over the whole run, including the drain once the reader reads: above high water
  // (the recv armed when the mark is crossed delivers until the pause lands), but each recv is
  // limited to high water, so never above twice high water (see docs/proxy.md).
  slow.reset();
  fast.reset();
  ASSERT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_active") == 0; }));
  const double peak = proxy.get("ferry_proxy_peak_held_bytes");
  std::printf("slow reader: peak %.0f bytes held by one direction\n", peak);
  EXPECT_GT(peak, 65536);
  EXPECT_LE(peak, 2 * 65536);
}

TEST(ProxyPlane, ServiceAndGlobalCapsRefuseAndCount) {
  TestBackend backend(echo_handler);
  Proxy proxy({backend.endpoint()});
  proxy.config.services[0].max_connections = 2;
  proxy.start();
  std::vector<UniqueFd> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(connect_to(proxy.address()));
    std::byte b[1] = {std::byte{1}}, r[1];
    rt::exchange(open.back().get(), b, r);
  }
  UniqueFd third = connect_to(proxy.address());
  auto [bytes, error] = drain_socket(third.get());
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_EQ(proxy.get("ferry_proxy_connections_refused_total", {{"reason", "service_limit"}}), 1);

  // The global cap, lowered by a reload, refuses too.
  config::Config next = proxy.config;
  next.services[0].max_connections = 0;
  next.tcp.proxy.max_connections = 2;
  proxy.plane.apply(next);
  UniqueFd fourth = connect_to(proxy.address());
  auto [bytes4, error4] = drain_socket(fourth.get());
  EXPECT_EQ(error4, ECONNRESET);
  EXPECT_EQ(proxy.get("ferry_proxy_connections_refused_total", {{"reason", "global_limit"}}), 1);
  open.pop_back();
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_active") == 1; }));
  UniqueFd fifth = connect_to(proxy.address());
  std::byte b[1] = {std::byte{1}}, r[1];
  rt::exchange(fifth.get(), b, r);
}

TEST(ProxyPlane, ReloadKeepsEstablishedConnectionsOnTheirBackend) {
  TestBackend a(echo_handler);
  TestBackend b(echo_handler);
  Proxy proxy({a.endpoint()});
  proxy.start();
  UniqueFd old_conn = connect_to(proxy.address());
  std::vector<std::byte> out(5000), in(5000);
  rt::exchange(old_conn.get(), out, in);
  config::Config next = proxy.config;
  next.services[0].backends = {b.endpoint()};
  auto result = proxy.plane.apply(next);
  EXPECT_TRUE(result.removed.empty());
  EXPECT_TRUE(result.added.empty());
  UniqueFd new_conn = connect_to(proxy.address());
  rt::fill_pattern(5, 0, out);
  rt::exchange(new_conn.get(), out, in);
  rt::exchange(old_conn.get(), out, in);  // still alive, still on a
  EXPECT_EQ(rt::check_pattern(5, 0, in), in.size());
  EXPECT_EQ(a.accepted(), 1);
  EXPECT_EQ(b.accepted(), 1);
  EXPECT_EQ(proxy.get("ferry_proxy_resets_total"), 0);
}

TEST(ProxyPlane, RemovedServiceDrainsThenResets) {
  TestBackend backend(echo_handler);
  Proxy proxy({backend.endpoint()});
  proxy.config.tcp.proxy.drain_timeout_ms = 300;
  proxy.config.services.push_back(
      proxy_service({backend.endpoint()}, config::BalancePolicy::round_robin));
  proxy.config.services.back().name = "other";
  proxy.start();
  const net::Endpoint at = proxy.address();
  UniqueFd c = connect_to(at);
  std::vector<std::byte> out(100), in(100);
  rt::exchange(c.get(), out, in);
  config::Config next = proxy.config;
  next.services.erase(next.services.begin());  // "web" goes
  const auto t0 = std::chrono::steady_clock::now();
  auto result = proxy.plane.apply(next);
  EXPECT_EQ(result.removed, std::vector<std::string>{"web"});
  // The listener is closed at once; the open connection keeps working during the grace.
  EXPECT_THROW(connect_to(at), std::system_error);
  rt::exchange(c.get(), out, in);
  auto [bytes, error] = drain_socket(c.get());
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s);
}

TEST(ProxyPlane, StopResetsWhatTheDrainLeft) {
  TestBackend backend(echo_handler);
  Proxy proxy({backend.endpoint()});
  proxy.config.tcp.proxy.drain_timeout_ms = 100;
  proxy.start();
  UniqueFd c = connect_to(proxy.address());
  std::vector<std::byte> out(100), in(100);
  rt::exchange(c.get(), out, in);
  const auto t0 = std::chrono::steady_clock::now();
  proxy.plane.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  auto [bytes, error] = drain_socket(c.get());
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_FALSE(proxy.plane.running());
}

std::int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t pages = 0;
  std::int64_t resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

TEST(ProxyPlane, IdleConnectionsCostLittleMemoryEach) {
  // A backend that never accepts: the kernel completes the handshakes into its backlog, so the
  // only user-space memory a connection adds is the proxy's (client sockets are kernel memory).
  UniqueFd sink = tcp::open_listener({*net::IpAddress::parse("127.0.0.1"), 0}, false, 4096);
  Proxy proxy({tcp::bound_endpoint(sink.get())});
  proxy.start();
  std::vector<UniqueFd> clients;
  auto open = [&](int n) {
    for (int i = 0; i < n; ++i) clients.push_back(connect_to(proxy.address()));
    const double want = static_cast<double>(clients.size());
    return eventually([&] { return proxy.get("ferry_proxy_backend_connections_active") == want; },
                      20s);
  };
  ASSERT_TRUE(open(100));  // warm-up: allocator arenas, queues, metric snapshots
  constexpr int kIdle = 1000;
  const std::int64_t before = rss_bytes();
  ASSERT_TRUE(open(kIdle));
  const std::int64_t per_connection = (rss_bytes() - before) / kIdle;
  std::printf("idle proxied connection: %lld bytes of RSS each (%d connections)\n",
              static_cast<long long>(per_connection), kIdle);
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(per_connection, 64 * 1024);  // redzones and the allocator's quarantine
#else
  EXPECT_LT(per_connection, 4096);
#endif
  sink.reset();  // the backlog's connections are reset by the kernel; the proxy passes it on
  EXPECT_TRUE(eventually([&] { return proxy.get("ferry_proxy_connections_active") == 0; }, 20s));
  EXPECT_EQ(proxy.get("ferry_proxy_resets_total"), kIdle + 100);
}

TEST(ProxyPlane, ServicesViewShowsProxyState) {
  TestBackend backend(echo_handler);
  Proxy proxy({backend.endpoint()});
  proxy.start();
  UniqueFd c = connect_to(proxy.address());
  std::byte b[1] = {std::byte{1}}, r[1];
  rt::exchange(c.get(), b, r);
  nlohmann::json view = proxy.plane.services();
  ASSERT_TRUE(view.contains("web"));
  EXPECT_EQ(view["web"]["kind"], "proxy");
  EXPECT_EQ(view["web"]["proxy"]["active"], 1);
  EXPECT_EQ(view["web"]["proxy"]["backends"][0]["backend"], backend.endpoint().to_string());
  EXPECT_EQ(view["web"]["proxy"]["backends"][0]["active"], 1);
  EXPECT_EQ(proxy.plane.status()["proxy"]["connections"], 1);
}

}  // namespace
}  // namespace ferry::proxy
