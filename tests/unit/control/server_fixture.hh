// The control server unit tests' fixtures: a real ControlServer in a temp dir, driven over its
// Unix socket (and TCP listener) by blocking clients while its io_context runs on a thread of its
// own. Shared by server_test.cc and served_connection_test.cc.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "lib/common/unique_fd.hh"
#include "lib/control/server.hh"

namespace ferry::control::testing {

using nlohmann::json;

// A blocking line client. Reads give up after 10 s so that a broken server fails the test
// instead of hanging it; no test waits that long when the server behaves.
class LineClient {
 public:
  static LineClient unix_socket(const std::string& path) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("connect " + path + ": " + std::strerror(errno));
    }
    return LineClient(std::move(fd));
  }

  // From `source` (an address of this host, such as 127.0.0.2) when given.
  static LineClient tcp(const net::Endpoint& endpoint,
                        const std::optional<net::IpAddress>& source = std::nullopt) {
    sockaddr_storage addr{};
    socklen_t length = endpoint.to_sockaddr(addr);
    UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (source) {
      sockaddr_storage local{};
      socklen_t local_length = net::Endpoint{*source, 0}.to_sockaddr(local);
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), local_length) != 0) {
        throw std::runtime_error("bind " + source->to_string() + ": " + std::strerror(errno));
      }
    }
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), length) != 0) {
      throw std::runtime_error("connect " + endpoint.to_string() + ": " + std::strerror(errno));
    }
    return LineClient(std::move(fd));
  }

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // The next line without its newline; nullopt at EOF or on a connection error.
  std::optional<std::string> read_line() {
    for (;;) {
      auto newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      char chunk[65536];
      ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        throw std::runtime_error("no answer within 10 s");
      }
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  json read_json() {
    auto line = read_line();
    if (!line) throw std::runtime_error("connection closed before a response");
    return json::parse(*line);
  }

  json request(const std::string& line) {
    send(line + "\n");
    return read_json();
  }

  // Waits until the server has closed its end, without reading what it sent before.
  bool wait_for_peer_close() {
    pollfd p{fd_.get(), POLLRDHUP, 0};
    return ::poll(&p, 1, 10000) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
  }

  void shutdown_write() { ::shutdown(fd_.get(), SHUT_WR); }

  // The client end of a connection made some other way (a socketpair the server serves).
  static LineClient adopt(UniqueFd fd) { return LineClient(std::move(fd)); }

 private:
  explicit LineClient(UniqueFd fd) : fd_(std::move(fd)) {
    timeval timeout{10, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }

  UniqueFd fd_;
  std::string buffer_;
};

inline double metric_value(const metrics::Registry& registry, const std::string& name,
                           const metrics::Labels& labels) {
  for (const auto& family : registry.snapshot()) {
    if (family.name != name) continue;
    for (const auto& sample : family.samples) {
      if (sample.labels == labels) return sample.value;
    }
  }
  ADD_FAILURE() << "no sample " << name;
  return -1;
}

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ferry-control-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    config_.socket = dir_ + "/run/ferryd.sock";
    config_.mode = 0660;
    config_.group = std::nullopt;  // no 'ferry' group on a test machine

    add_help_command(table_);
    table_.add("echo", Access::read, "returns its args",
               [](const json& args, const Peer&) { return args; });
    table_.add("whoami", Access::read, "returns the peer", [](const json&, const Peer& peer) {
      return json{{"pid", peer.pid}, {"uid", peer.uid}, {"tcp", peer.tcp}};
    });
    table_.add("admin_only", Access::admin, "needs admin", [](const json&, const Peer&) {
      return json{{"done", true}};
    });
    table_.add("big", Access::read, "returns args.bytes bytes", [](const json& args, const Peer&) {
      return json{{"data", std::string(args.at("bytes").get<std::size_t>(), 'x')}};
    });
  }

  void TearDown() override {
    stop_io();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  ControlServer& make_server() {
    server_ = std::make_unique<ControlServer>(io_, config_, table_, policy_, registry_);
    return *server_;
  }

  void start() {
    if (!server_) make_server();
    server_->start();
    run_io();
  }

  void run_io() {
    if (io_thread_.joinable()) return;
    io_thread_ = std::thread([this] { io_.run(); });
  }

  void stop_io() {
    work_.reset();
    io_.stop();
    if (io_thread_.joinable()) io_thread_.join();
  }

  std::string start_error() {
    try {
      make_server().start();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "started";
  }

  LineClient client() { return LineClient::unix_socket(config_.socket); }

  double counter(const std::string& name, const metrics::Labels& labels) {
    return metric_value(registry_, name, labels);
  }

  std::string dir_;
  config::ControlConfig config_;
  CommandTable table_;
  AccessPolicy policy_{::getuid()};
  metrics::Registry registry_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  std::thread io_thread_;
  std::unique_ptr<ControlServer> server_;
};

class ControlServerTcpTest : public ControlServerTest {
 protected:
  void SetUp() override {
    ControlServerTest::SetUp();
    config_.tcp.listen = net::Endpoint::parse("127.0.0.1:0");
    config_.tcp.token_file = dir_ + "/token";
    write_token("s3cret\n", 0600);
  }

  void write_token(const std::string& content, mode_t mode) {
    std::ofstream(*config_.tcp.token_file, std::ios::trunc) << content;
    ASSERT_EQ(::chmod(config_.tcp.token_file->c_str(), mode), 0);
  }

  LineClient tcp_client() {
    auto endpoint = server_->tcp_endpoint();
    if (!endpoint) throw std::runtime_error("no TCP listener");
    return LineClient::tcp(*endpoint);
  }
};

}  // namespace ferry::control::testing
