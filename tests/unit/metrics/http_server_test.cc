// The /metrics HTTP server, driven over real sockets on 127.0.0.1 with the io_context on a thread.
#include "lib/metrics/http_server.hh"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "lib/common/unique_fd.hh"
#include "lib/metrics/prometheus.hh"

namespace ferry::metrics {
namespace {

using namespace std::chrono_literals;

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// A blocking test client. Every read gives up after 5 s so a broken server fails the test
// instead of hanging it.
class Client {
 public:
  // From `source` (an address of this host, such as 127.0.0.2) when given.
  explicit Client(const net::Endpoint& server, const char* source = nullptr)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    timeval tv{5, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (source) {
      sockaddr_storage local;
      socklen_t local_len = net::Endpoint{*net::IpAddress::parse(source), 0}.to_sockaddr(local);
      if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&local), local_len) != 0) {
        throw std::runtime_error(std::string("bind: ") + std::strerror(errno));
      }
    }
    sockaddr_storage ss;
    socklen_t len = server.to_sockaddr(ss);
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
    }
  }

  void send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
      data.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  Response read_response(bool head = false) {
    std::size_t end;
    while ((end = buffered_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) throw std::runtime_error("closed before a response head: " + buffered_);
    }
    Response r;
    std::string head_text = buffered_.substr(0, end + 2);
    buffered_.erase(0, end + 4);
    std::size_t line_end = head_text.find("\r\n");
    std::string status_line = head_text.substr(0, line_end);
    if (!status_line.starts_with("HTTP/1.1 "))
      throw std::runtime_error("bad status: " + status_line);
    r.status = std::stoi(status_line.substr(9, 3));
    for (std::size_t pos = line_end + 2; pos < head_text.size();) {
      std::size_t eol = head_text.find("\r\n", pos);
      std::string line = head_text.substr(pos, eol - pos);
      std::size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(colon + 2);
      pos = eol + 2;
    }
    std::size_t length = std::stoul(r.headers.at("content-length"));
    if (head) return r;
    while (buffered_.size() < length) {
      if (!fill()) throw std::runtime_error("closed inside a response body");
    }
    r.body = buffered_.substr(0, length);
    buffered_.erase(0, length);
    return r;
  }

  // Waits for the server to close the connection; true on a clean EOF with nothing more sent.
  bool closed_by_server() {
    char c;
    ssize_t n = ::recv(fd_.get(), &c, 1, 0);
    return n == 0 && buffered_.empty();
  }

 private:
  bool fill() {
    char buf[4096];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n < 0) throw std::runtime_error(std::string("recv: ") + std::strerror(errno));
    buffered_.append(buf, static_cast<std::size_t>(n));
    return n > 0;
  }

  UniqueFd fd_;
  std::string buffered_;
};

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  MetricsHttpServerTest() {
    app_ = registry_.add([](SnapshotBuilder& b) {
      b.gauge("ferry_test_value", "A value for the test.", {{"k", "v"}}, 42);
    });
  }

  void start(MetricsHttpServerOptions options = {}) {
    server_ = std::make_unique<MetricsHttpServer>(io_, *net::Endpoint::parse("127.0.0.1:0"),
                                                  registry_, options);
    server_->start();
    endpoint_ = server_->local_endpoint();
    io_thread_ = std::thread([this] { io_.run(); });
  }

  // stop() runs on the io thread; io_.run() returning proves it left no work (timers, reads).
  void stop_and_join() {
    if (!io_thread_.joinable()) return;
    boost::asio::post(io_, [this] { server_->stop(); });
    io_thread_.join();
  }

  void TearDown() override { stop_and_join(); }

  std::string get(const std::string& target) {
    return "GET " + target + " HTTP/1.1\r\nHost: test\r\n\r\n";
  }

  // A scrape from 127.0.0.1 has a rejected_connections_total{reason} of `count`.
  void expect_rejected(const std::string& reason, int count) {
    Client scraper(endpoint_, "127.0.0.1");
    scraper.send(get("/metrics"));
    Response r = scraper.read_response();
    EXPECT_EQ(r.status, 200);
    std::string line = "ferry_metrics_http_rejected_connections_total{reason=\"" + reason + "\"} " +
                       std::to_string(count) + "\n";
    EXPECT_NE(r.body.find(line), std::string::npos) << line << r.body;
  }

  boost::asio::io_context io_;
  Registry registry_;
  Registry::Handle app_;
  std::unique_ptr<MetricsHttpServer> server_;
  net::Endpoint endpoint_;
  std::thread io_thread_;
};

TEST_F(MetricsHttpServerTest, BindsAnEphemeralPortOnLoopback) {
  start();
  EXPECT_EQ(endpoint_.address.to_string(), "127.0.0.1");
  EXPECT_NE(endpoint_.port, 0);
}

TEST_F(MetricsHttpServerTest, ServesMetricsWithPrometheusContentType) {
  start();
  Client client(endpoint_);
  client.send(get("/metrics"));
  Response r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.headers["content-length"], std::to_string(r.body.size()));
  EXPECT_EQ(r.headers.count("connection"), 0u);
  // The body is the registry's snapshot at the time; the test's own family is all of it but
  // the server's counters, so compare that family exactly.
  EXPECT_NE(r.body.find("# HELP ferry_test_value A value for the test.\n"
                        "# TYPE ferry_test_value gauge\n"
                        "ferry_test_value{k=\"v\"} 42\n"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("ferry_metrics_http_requests_total{code=\"200\"} 0\n"), std::string::npos);
  for (const char* reason : {"per_source", "limit", "request_timeout", "write_timeout"}) {
    EXPECT_NE(r.body.find(std::string("ferry_metrics_http_rejected_connections_total{reason=\"") +
                          reason + "\"} 0\n"),
              std::string::npos)
        << reason;
  }
  EXPECT_EQ(r.body.back(), '\n');
}

TEST_F(MetricsHttpServerTest, KeepsAliveAcrossTwoRequestsAndCountsThem) {
  start();
  Client client(endpoint_);
  client.send(get("/metrics"));
  EXPECT_EQ(client.read_response().status, 200);
  client.send(get("/metrics"));
  Response second = client.read_response();
  EXPECT_EQ(second.status, 200);
  EXPECT_NE(second.body.find("ferry_metrics_http_requests_total{code=\"200\"} 1\n"),
            std::string::npos)
      << second.body;
}

TEST_F(MetricsHttpServerTest, AnswersPipelinedRequestsInOrder) {
  start();
  Client client(endpoint_);
  client.send(get("/nope") + get("/") + "HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n" +
              get("/metrics"));
  EXPECT_EQ(client.read_response().status, 404);
  Response index = client.read_response();
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.headers["content-type"], "text/html; charset=utf-8");
  Response head = client.read_response(/*head=*/true);
  EXPECT_EQ(head.status, 200);
  Response metrics = client.read_response();
  EXPECT_EQ(metrics.status, 200);
  // HEAD announced the length of a body it did not send; the bodies differ only in counters.
  EXPECT_GT(std::stoul(head.headers["content-length"]), 0u);
  EXPECT_NE(metrics.body.find("ferry_test_value{k=\"v\"} 42"), std::string::npos);
}

TEST_F(MetricsHttpServerTest, AnswersManyPipelinedRequestsInBatchesAndInOrder) {
  start();
  Client client(endpoint_);
  std::string requests;
  const int n = 400;  // enough answers to exceed one batch of pending output
  for (int i = 0; i < n; ++i) requests += get("/metrics");
  client.send(requests);
  std::size_t answered_bytes = 0;
  for (int i = 0; i < n; ++i) {
    Response r = client.read_response();
    ASSERT_EQ(r.status, 200) << "answer " << i;
    // Each body counts the answers before it: proof that they come in request order.
    ASSERT_NE(
        r.body.find("ferry_metrics_http_requests_total{code=\"200\"} " + std::to_string(i) + "\n"),
        std::string::npos)
        << "answer " << i;
    answered_bytes += r.body.size();
  }
  EXPECT_GT(answered_bytes, 256u * 1024);
}

TEST_F(MetricsHttpServerTest, IndexPageLinksToMetrics) {
  start();
  Client client(endpoint_);
  client.send(get("/"));
  Response r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("<a href=\"/metrics\">"), std::string::npos) << r.body;
}

TEST_F(MetricsHttpServerTest, UnknownPathIs404AndKeepsTheConnection) {
  start();
  Client client(endpoint_);
  client.send(get("/metrics/extra"));
  EXPECT_EQ(client.read_response().status, 404);
  client.send(get("/metrics?name[]=x"));
  EXPECT_EQ(client.read_response().status, 200);
}

TEST_F(MetricsHttpServerTest, OtherMethodIs405WithAllowAndCloses) {
  start();
  Client client(endpoint_);
  client.send("POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
  Response r = client.read_response();
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET, HEAD");
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(client.closed_by_server());
}

TEST_F(MetricsHttpServerTest, GarbageIs400AndClosesAndIsCounted) {
  start();
  {
    Client client(endpoint_);
    client.send(std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11));
    Response r = client.read_response();
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.headers["connection"], "close");
    EXPECT_TRUE(client.closed_by_server());
  }
  Client client(endpoint_);
  client.send(get("/metrics"));
  Response r = client.read_response();
  EXPECT_NE(r.body.find("ferry_metrics_http_requests_total{code=\"400\"} 1\n"), std::string::npos)
      << r.body;
}

TEST_F(MetricsHttpServerTest, Http10GetsOneAnswerThenClose) {
  start();
  Client client(endpoint_);
  client.send("GET /metrics HTTP/1.0\r\n\r\n");
  Response r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(client.closed_by_server());
}

TEST_F(MetricsHttpServerTest, ConnectionCloseIsHonouredAfterTheAnswer) {
  start();
  Client client(endpoint_);
  client.send("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" + get("/"));
  EXPECT_EQ(client.read_response().status, 200);
  EXPECT_TRUE(client.closed_by_server());  // the pipelined second request is not answered
}

TEST_F(MetricsHttpServerTest, SlowClientIsClosedAfterTheRequestTimeout) {
  MetricsHttpServerOptions options;
  options.request_timeout = 200ms;
  start(options);
  auto t0 = std::chrono::steady_clock::now();
  Client client(endpoint_);
  client.send("GET /metr");
  EXPECT_TRUE(client.closed_by_server());
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(elapsed, 200ms);
  EXPECT_LT(elapsed, 4s);
}

TEST_F(MetricsHttpServerTest, IdleKeepAliveConnectionIsClosedAfterTheRequestTimeout) {
  MetricsHttpServerOptions options;
  options.request_timeout = 200ms;
  start(options);
  Client client(endpoint_);
  client.send(get("/"));
  EXPECT_EQ(client.read_response().status, 200);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(client.closed_by_server());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
}

TEST_F(MetricsHttpServerTest, ClosesAndCountsConnectionsBeyondTheLimit) {
  MetricsHttpServerOptions options;
  options.max_connections = 2;
  start(options);
  Client first(endpoint_), second(endpoint_);
  // An answer proves the server has accepted (and is holding) the connection.
  first.send(get("/"));
  EXPECT_EQ(first.read_response().status, 200);
  second.send(get("/"));
  EXPECT_EQ(second.read_response().status, 200);
  Client third(endpoint_);
  EXPECT_TRUE(third.closed_by_server());
  first.send(get("/metrics"));
  Response r = first.read_response();
  EXPECT_NE(r.body.find("ferry_metrics_http_rejected_connections_total{reason=\"limit\"} 1\n"),
            std::string::npos)
      << r.body;
}

TEST_F(MetricsHttpServerTest, AnAddressHoldingItsBudgetLeavesAnothersScrapeServed) {
  MetricsHttpServerOptions options;
  options.max_connections_per_source = 2;
  start(options);
  // Two half requests from 127.0.0.2 hold its whole budget; its third is closed at accept.
  Client first(endpoint_, "127.0.0.2"), second(endpoint_, "127.0.0.2");
  first.send("GET /metr");
  second.send("GET /metr");
  Client third(endpoint_, "127.0.0.2");
  EXPECT_TRUE(third.closed_by_server());
  // Accepted in order, so the first two are held now; a scrape from 127.0.0.1 is answered.
  expect_rejected("per_source", 1);
}

TEST_F(MetricsHttpServerTest, HalfRequestsAreClosedAtTheDeadlineAndCountedIdleOnesAreNot) {
  MetricsHttpServerOptions options;
  options.request_timeout = 200ms;
  options.max_connections_per_source = 1;
  start(options);
  Client half(endpoint_, "127.0.0.2");
  half.send("GET /metrics HTTP/1.1\r\nHost: t\r\n");  // no blank line: the head never ends
  EXPECT_TRUE(half.closed_by_server());
  Client silent(endpoint_, "127.0.0.2");  // the budget came back with the close
  EXPECT_TRUE(silent.closed_by_server());
  Client kept_alive(endpoint_, "127.0.0.3");
  kept_alive.send(get("/"));
  EXPECT_EQ(kept_alive.read_response().status, 200);
  EXPECT_TRUE(kept_alive.closed_by_server());  // idle after its answer: closed, not counted
  expect_rejected("request_timeout", 2);
}

TEST_F(MetricsHttpServerTest, StopClosesOpenConnections) {
  start();
  Client client(endpoint_);
  client.send(get("/"));
  EXPECT_EQ(client.read_response().status, 200);
  // A connection still in the listen backlog would be reset rather than closed, so let this one
  // be answered once (proving it was accepted) before it leaves a request half sent.
  Client partial(endpoint_);
  partial.send(get("/") + "GET / HTTP/1.1\r\n");
  EXPECT_EQ(partial.read_response().status, 200);
  stop_and_join();
  EXPECT_TRUE(client.closed_by_server());
  EXPECT_TRUE(partial.closed_by_server());
}

TEST_F(MetricsHttpServerTest, StartNamesTheAddressWhenItIsInUse) {
  start();
  MetricsHttpServer other(io_, endpoint_, registry_);
  try {
    other.start();
    FAIL() << "second bind succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "metrics.listen 127.0.0.1:" + std::to_string(endpoint_.port) +
                                         ": Address already in use");
  }
  other.stop();
}

TEST(MetricsHttpServer, DestructorAfterStopWithoutRunningIsSafe) {
  boost::asio::io_context io;
  Registry registry;
  {
    MetricsHttpServer server(io, *net::Endpoint::parse("127.0.0.1:0"), registry);
    server.start();
    server.stop();
    server.stop();
  }
  io.run();  // the aborted accept completes after the server is gone
  EXPECT_TRUE(registry.snapshot().empty());  // its collector left with it
}

}  // namespace
}  // namespace ferry::metrics
