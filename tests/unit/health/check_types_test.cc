// The udp, dns and http checks through the HealthChecker against real loopback servers run by
// the test: each passing answer keeps a backend up, each wrong one brings it down with its reason,
// an unbound UDP port is refused by ICMP, and "port" checks another port than the one served.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "lib/health/health_checker.hh"
#include "lib/health/health_report.hh"
#include "tests/unit/health/eventually.hh"

namespace ferry::health {
namespace {

using namespace std::chrono_literals;

net::Endpoint bound_endpoint(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return *net::Endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&addr), len);
}

UniqueFd bound_socket(int type, const char* address = "127.0.0.1:0") {
  sockaddr_storage addr{};
  socklen_t len = net::Endpoint::parse(address)->to_sockaddr(addr);
  UniqueFd fd(::socket(addr.ss_family, type | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  return fd;
}

// A server thread on one socket: `serve` is called whenever the socket is readable, until the
// destructor stops it (poll with a short timeout, so stopping needs no extra fd).
class LoopbackServer {
 public:
  using Serve = std::function<void(int fd)>;
  LoopbackServer(int type, Serve serve, const char* address = "127.0.0.1:0")
      : fd_(bound_socket(type, address)), endpoint_(bound_endpoint(fd_.get())) {
    if (type == SOCK_STREAM) {
      EXPECT_EQ(::listen(fd_.get(), 16), 0);
    }
    thread_ = std::thread([this, serve = std::move(serve)] {
      while (!stop_.load()) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 10) == 1) serve(fd_.get());
      }
    });
  }
  ~LoopbackServer() {
    stop_ = true;
    thread_.join();
  }
  const net::Endpoint& endpoint() const { return endpoint_; }

 private:
  UniqueFd fd_;
  net::Endpoint endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Answers every datagram with `reply(request)`; an empty reply sends nothing.
LoopbackServer::Serve datagram_server(std::function<std::string(const std::string&)> reply) {
  return [reply = std::move(reply)](int fd) {
    char buffer[2048];
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    ssize_t n = ::recvfrom(fd, buffer, sizeof(buffer), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&peer), &len);
    if (n < 0) return;
    std::string out = reply(std::string(buffer, static_cast<std::size_t>(n)));
    if (!out.empty()) {
      ::sendto(fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&peer), len);
    }
  };
}

// A DNS server answering every query with its question and `rcode` (flags given whole).
LoopbackServer::Serve dns_server(std::atomic<std::uint16_t>& flags) {
  return datagram_server([&flags](const std::string& query) {
    std::string r = query;
    if (r.size() < 12) return std::string();
    std::uint16_t f = flags.load();
    r[2] = static_cast<char>(f >> 8);
    r[3] = static_cast<char>(f & 0xff);
    return r;
  });
}

// Accepts, reads the request head, answers `response()` and closes.
LoopbackServer::Serve http_server(std::function<std::string(const std::string&)> response) {
  return [response = std::move(response)](int listener) {
    UniqueFd c(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) return;
    std::string request;
    char buffer[1024];
    while (request.find("\r\n\r\n") == std::string::npos) {
      pollfd p{c.get(), POLLIN, 0};
      if (::poll(&p, 1, 1000) != 1) return;
      ssize_t n = ::recv(c.get(), buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      request.append(buffer, static_cast<std::size_t>(n));
    }
    std::string out = response(request);
    ::send(c.get(), out.data(), out.size(), MSG_NOSIGNAL);
  };
}

using test::eventually;

config::HealthCheckConfig fast(config::HealthCheckType type) {
  config::HealthCheckConfig p;
  p.type = type;
  p.interval_ms = 20;
  p.timeout_ms = 15;
  p.rise = 1;
  p.fall = 1;
  return p;
}

// Runs checks of `params` against `backend` until `count` have finished; returns the view.
BackendHealth run_checks(const config::HealthCheckConfig& params, const net::Endpoint& backend,
                         std::uint64_t count = 3) {
  HealthBoard board;
  HealthChecker checker(board);
  checker.set_targets({{"svc", backend, params, {}}});
  checker.start();
  auto finished = [&] {
    auto s = checker.snapshot();
    std::uint64_t n = 0;
    for (auto c : s.at(0).checks) n += c;
    return n >= count;
  };
  EXPECT_TRUE(eventually(finished));
  checker.stop();
  BackendHealth v = checker.snapshot().at(0);
  EXPECT_EQ(board.state("svc", backend)->up.load(), v.up);
  return v;
}

std::uint64_t count_of(const BackendHealth& v, CheckResult r) {
  return v.checks[static_cast<std::size_t>(r)];
}

TEST(UdpCheck, AnyReplyPassesWithoutExpect) {
  LoopbackServer server(SOCK_DGRAM, datagram_server([](const std::string&) { return "pong"; }));
  auto p = fast(config::HealthCheckType::udp);
  p.send = "ping";
  BackendHealth v = run_checks(p, server.endpoint());
  EXPECT_TRUE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::ok), 3u);
  EXPECT_EQ(v.last_reason, "reply of 4 bytes");
  EXPECT_EQ(v.type, config::HealthCheckType::udp);
}

TEST(UdpCheck, SendsTheConfiguredBytesAndMatchesTheExpectedPrefix) {
  std::atomic<bool> heard_ping{false};
  LoopbackServer server(SOCK_DGRAM, datagram_server([&](const std::string& request) {
                          heard_ping = heard_ping || request == std::string("\x00ping", 5);
                          return std::string("\x01pong and more", 14);
                        }));
  auto p = fast(config::HealthCheckType::udp);
  p.send = std::string("\x00ping", 5);
  p.expect = std::string("\x01pong", 5);
  BackendHealth v = run_checks(p, server.endpoint());
  EXPECT_TRUE(heard_ping);
  EXPECT_TRUE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::ok), 3u);
}

TEST(UdpCheck, AReplyWithAnotherStartFails) {
  LoopbackServer server(SOCK_DGRAM, datagram_server([](const std::string&) { return "nope"; }));
  auto p = fast(config::HealthCheckType::udp);
  p.send = "ping";
  p.expect = "pong";
  BackendHealth v = run_checks(p, server.endpoint());
  EXPECT_FALSE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::error), 3u);
  EXPECT_EQ(v.last_error, "reply did not start with expect");
  EXPECT_EQ(v.last_result, CheckResult::error);
}

TEST(UdpCheck, SilenceTimesOut) {
  LoopbackServer server(SOCK_DGRAM, datagram_server([](const std::string&) { return ""; }));
  auto p = fast(config::HealthCheckType::udp);
  p.send = "ping";
  BackendHealth v = run_checks(p, server.endpoint(), 2);
  EXPECT_FALSE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::timeout), 2u);
  EXPECT_EQ(v.last_error, "no reply within 15 ms");
}

TEST(UdpCheck, AnUnboundPortIsRefusedByIcmp) {
  net::Endpoint closed;
  {
    UniqueFd fd = bound_socket(SOCK_DGRAM);
    closed = bound_endpoint(fd.get());
  }
  auto p = fast(config::HealthCheckType::udp);
  p.send = "ping";
  BackendHealth v = run_checks(p, closed);
  EXPECT_FALSE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::refused), 3u);
  EXPECT_EQ(v.last_error, "port unreachable (ICMP)");
}

TEST(UdpCheck, PortChecksAnotherPortOfTheBackendsAddress) {
  LoopbackServer server(SOCK_DGRAM, datagram_server([](const std::string&) { return "pong"; }));
  net::Endpoint served = server.endpoint();
  served.port = 9;  // nothing is asked there: the check goes to `port`
  auto p = fast(config::HealthCheckType::udp);
  p.send = "ping";
  p.port = server.endpoint().port;
  BackendHealth v = run_checks(p, served);
  EXPECT_TRUE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::ok), 3u);
}

TEST(DnsCheck, PassesOnTheRcodesListedAndFailsOnOthersWithTheirName) {
  std::atomic<std::uint16_t> flags{0x8180};  // response, RD, RA, NOERROR
  LoopbackServer server(SOCK_DGRAM, dns_server(flags));
  auto p = fast(config::HealthCheckType::dns);
  p.name = "example.org";
  BackendHealth v = run_checks(p, server.endpoint());
  EXPECT_TRUE(v.up);
  EXPECT_EQ(v.last_reason, "rcode NOERROR");

  flags = 0x8182;  // SERVFAIL
  v = run_checks(p, server.endpoint());
  EXPECT_FALSE(v.up);
  EXPECT_EQ(v.last_error, "rcode SERVFAIL");

  flags = 0x8183;  // NXDOMAIN, listed as passing
  p.rcodes = 1u << 0 | 1u << 3;
  v = run_checks(p, server.endpoint());
  EXPECT_TRUE(v.up);
  EXPECT_EQ(v.last_reason, "rcode NXDOMAIN");
}

TEST(DnsCheck, ATruncatedReplyPassesWhateverItsRcode) {
  std::atomic<std::uint16_t> flags{0x8382};  // TC, SERVFAIL
  LoopbackServer server(SOCK_DGRAM, dns_server(flags));
  BackendHealth v = run_checks(fast(config::HealthCheckType::dns), server.endpoint());
  EXPECT_TRUE(v.up);
  EXPECT_EQ(v.last_reason, "truncated reply (TC), rcode SERVFAIL");
}

TEST(DnsCheck, RepliesWithAnotherIdAreIgnoredUntilTheTimeout) {
  LoopbackServer server(SOCK_DGRAM, datagram_server([](const std::string& query) {
                          std::string r = query;
                          r[0] = static_cast<char>(r[0] ^ 0x5a);
                          r[2] = static_cast<char>(0x81);
                          return r;
                        }));
  BackendHealth v = run_checks(fast(config::HealthCheckType::dns), server.endpoint(), 2);
  EXPECT_FALSE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::timeout), 2u);
  EXPECT_EQ(v.last_error, "no reply within 15 ms (ignored a reply with another id)");
}

TEST(DnsCheck, EachCheckAsksWithAFreshId) {
  std::mutex mutex;
  std::set<std::string> ids;
  LoopbackServer server(SOCK_DGRAM, datagram_server([&](const std::string& query) {
                          std::lock_guard lock(mutex);
                          ids.insert(query.substr(0, 2));
                          std::string r = query;
                          r[2] = static_cast<char>(0x81);
                          r[3] = static_cast<char>(0x80);
                          return r;
                        }));
  BackendHealth v = run_checks(fast(config::HealthCheckType::dns), server.endpoint(), 8);
  EXPECT_TRUE(v.up);
  std::lock_guard lock(mutex);
  EXPECT_GE(ids.size(), 6u);  // 16-bit random ids: a repeat among 8 is rare, two repeats rarer
}

std::string status_response(int status) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 0\r\n\r\n";
}

TEST(HttpCheck, PassesWithinExpectStatusAndSendsPathAndHost) {
  std::mutex mutex;
  std::string last_request;
  LoopbackServer server(SOCK_STREAM, http_server([&](const std::string& request) {
                          std::lock_guard lock(mutex);
                          last_request = request;
                          return status_response(204);
                        }));
  auto p = fast(config::HealthCheckType::http);
  p.path = "/healthz";
  BackendHealth v = run_checks(p, server.endpoint());
  EXPECT_TRUE(v.up);
  EXPECT_EQ(v.last_reason, "status 204");
  std::lock_guard lock(mutex);
  EXPECT_EQ(last_request.substr(0, last_request.find("\r\n")), "GET /healthz HTTP/1.1");
  EXPECT_NE(last_request.find("\r\nHost: " + server.endpoint().to_string() + "\r\n"),
            std::string::npos)
      << last_request;
}

TEST(HttpCheck, AStatusOutsideTheRangeFailsWithIt) {
  LoopbackServer server(SOCK_STREAM,
                        http_server([](const std::string&) { return status_response(503); }));
  auto p = fast(config::HealthCheckType::http);
  p.host = "web.example";
  BackendHealth v = run_checks(p, server.endpoint());
  EXPECT_FALSE(v.up);
  EXPECT_EQ(v.last_error, "status 503");
  p.status_low = 500;
  p.status_high = 503;
  EXPECT_TRUE(run_checks(p, server.endpoint()).up);
}

TEST(HttpCheck, ANonHttpAnswerIsAnError) {
  LoopbackServer server(SOCK_STREAM, http_server([](const std::string&) {
                          return std::string("SSH-2.0-OpenSSH_9.2\r\n");
                        }));
  BackendHealth v = run_checks(fast(config::HealthCheckType::http), server.endpoint());
  EXPECT_FALSE(v.up);
  EXPECT_EQ(count_of(v, CheckResult::error), 3u);
  EXPECT_EQ(v.last_error, "not an HTTP response: does not start with HTTP/: 'SSH-2.0-OpenSSH_...'");
}

TEST(HttpCheck, AServerThatClosesWithoutAnswerIsAnError) {
  LoopbackServer server(SOCK_STREAM, http_server([](const std::string&) { return std::string(); }));
  BackendHealth v = run_checks(fast(config::HealthCheckType::http), server.endpoint());
  EXPECT_FALSE(v.up);
  EXPECT_EQ(v.last_error, "connection closed without a response");
}

TEST(HttpCheck, AClosedPortIsRefusedAndPortRedirectsTheCheck) {
  LoopbackServer server(SOCK_STREAM,
                        http_server([](const std::string&) { return status_response(200); }));
  net::Endpoint closed;
  {
    UniqueFd fd = bound_socket(SOCK_STREAM);
    closed = bound_endpoint(fd.get());
  }
  auto p = fast(config::HealthCheckType::http);
  BackendHealth v = run_checks(p, closed);
  EXPECT_FALSE(v.up);
  EXPECT_EQ(v.last_error, "connection refused");
  p.port = server.endpoint().port;
  EXPECT_TRUE(run_checks(p, closed).up);
}

TEST(HealthReport, ShowsTheCheckTypeReasonAndADurationHistogram) {
  LoopbackServer server(SOCK_STREAM,
                        http_server([](const std::string&) { return status_response(503); }));
  HealthBoard board;
  HealthChecker checker(board);
  checker.set_targets({{"web", server.endpoint(), fast(config::HealthCheckType::http), {}}});
  checker.start();
  ASSERT_TRUE(
      eventually([&] { return count_of(checker.snapshot().at(0), CheckResult::error) >= 2; }));
  checker.stop();
  auto status = health_status(board, &checker);
  const auto& row = status["backends"][0];
  EXPECT_EQ(row["check"], "http");
  EXPECT_EQ(row["last_result"], "error");
  EXPECT_EQ(row["last_reason"], "status 503");
  metrics::Registry registry;
  auto handle =
      registry.add([&](metrics::SnapshotBuilder& out) { collect_health(board, &checker, out); });
  bool found = false;
  for (const auto& family : registry.snapshot()) {
    if (family.name != "ferry_health_check_duration_seconds") continue;
    ASSERT_EQ(family.type, metrics::Type::histogram);
    ASSERT_EQ(family.samples.size(), 1u);
    const auto& h = family.samples[0].histogram;
    auto checks = checker.snapshot().at(0).checks;
    EXPECT_EQ(h.count, checks[0] + checks[1] + checks[2] + checks[3]);
    EXPECT_EQ(h.buckets.size(), kCheckDurationBounds.size());
    EXPECT_GT(h.sum, 0.0);
    EXPECT_EQ(family.samples[0].labels,
              (metrics::Labels{{"service", "web"}, {"backend", server.endpoint().to_string()}}));
    found = true;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace ferry::health
