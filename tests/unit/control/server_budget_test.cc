// The connection budgets in the real ControlServer: a uid without admin access held to its
// budget and the local share while admins get the reserve (peers the test picks, served over
// socketpairs), the unauthenticated TCP pool with its per-source budget from 127.0.0.x, promotion
// on authentication, the auth deadline, and the counters and releases of each.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "lib/common/unique_fd.hh"
#include "lib/control/server.hh"
#include "tests/unit/control/server_fixture.hh"

namespace ferry::control {
namespace {

using testing::LineClient;
using namespace std::chrono_literals;

constexpr const char* kHelp = R"({"id":1,"cmd":"help"})";
constexpr const char* kAuth = R"({"auth":"s3cret"})";

net::IpAddress loopback(int last) {
  return *net::IpAddress::parse("127.0.0." + std::to_string(last));
}

class ControlServerBudgetTest : public testing::ControlServerTcpTest {
 protected:
  // 12 in all: 2 reserved for admins, 4 for unauthenticated TCP (2 per address), so local peers
  // without admin access share 6, 3 per uid.
  void SetUp() override {
    ControlServerTcpTest::SetUp();
    config_.max_connections = 12;
    config_.admin_reserved_connections = 2;
    config_.max_connections_per_uid = 3;
    config_.tcp.max_unauthenticated = 4;
    config_.tcp.max_unauthenticated_per_source = 2;
  }

  // A socketpair end served as a Unix connection from `uid`; the client end.
  LineClient served_as(uid_t uid) {
    int pair[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    Peer peer;
    peer.pid = 4242;
    peer.uid = uid;
    peer.gid = uid;
    std::promise<void> served;
    boost::asio::post(io_, [&] {
      server_->serve(UniqueFd(pair[0]), peer, Transport::unix_socket);
      served.set_value();
    });
    served.get_future().wait();
    return LineClient::adopt(UniqueFd(pair[1]));
  }

  double rejected(const std::string& reason) {
    return counter("ferry_control_rejected_connections_total", {{"reason", reason}});
  }

  // Until the server has counted `n` open (closes reach it asynchronously).
  void await_open(std::size_t n) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (server_->open_connections() != n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(server_->open_connections(), n);
  }
};

TEST_F(ControlServerBudgetTest, AUidWithoutAdminAccessKeepsToItsBudgetAndAdminsToTheReserve) {
  start();
  std::vector<LineClient> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(served_as(65534));
    EXPECT_EQ(held.back().request(kHelp)["ok"], true);
  }
  EXPECT_EQ(served_as(65534).read_line(), std::nullopt);  // its fourth
  EXPECT_EQ(rejected("per_uid"), 1);

  for (int i = 0; i < 3; ++i) {
    held.push_back(served_as(65533));
    EXPECT_EQ(held.back().request(kHelp)["ok"], true);
  }
  EXPECT_EQ(served_as(65532).read_line(), std::nullopt);  // the local share is taken
  EXPECT_EQ(rejected("reserved"), 1);

  // The test's own uid is the policy's daemon uid: an admin, served from the reserve (and,
  // with TCP quiet, from the unauthenticated pool's slots too: admins may take any).
  for (int i = 0; i < 6; ++i) {
    held.push_back(client());
    EXPECT_EQ(held.back().request(R"({"id":2,"cmd":"admin_only"})")["ok"], true);
  }
  EXPECT_EQ(client().read_line(), std::nullopt);
  EXPECT_EQ(rejected("limit"), 1);
  EXPECT_EQ(counter("ferry_control_connections_open", {}), 12);

  // The flood's connections end: its budget and the share are there again.
  held.erase(held.begin(), held.begin() + 3);
  await_open(9);
  for (int i = 0; i < 3; ++i) {
    held.push_back(served_as(65534));
    EXPECT_EQ(held.back().request(kHelp)["ok"], true);
  }
  EXPECT_EQ(rejected("per_uid"), 1);
  EXPECT_EQ(rejected("reserved"), 1);
}

TEST_F(ControlServerBudgetTest, UnauthenticatedTcpHoldsItsPoolWithABudgetPerAddress) {
  start();
  auto endpoint = *server_->tcp_endpoint();
  std::vector<LineClient> first;
  for (int i = 0; i < 2; ++i) first.push_back(LineClient::tcp(endpoint, loopback(1)));
  EXPECT_EQ(LineClient::tcp(endpoint, loopback(1)).read_line(), std::nullopt);
  EXPECT_EQ(rejected("per_source"), 1);

  std::vector<LineClient> second;
  for (int i = 0; i < 2; ++i) second.push_back(LineClient::tcp(endpoint, loopback(2)));
  EXPECT_EQ(LineClient::tcp(endpoint, loopback(3)).read_line(), std::nullopt);
  EXPECT_EQ(rejected("unauthenticated"), 1);

  // A Unix peer without admin access does not draw on the pool, nor it on theirs.
  LineClient local = served_as(65534);
  EXPECT_EQ(local.request(kHelp)["ok"], true);

  // Authenticating moves a connection from the pool and its address's budget to admin: the
  // address may open another.
  EXPECT_EQ(first[0].request(kAuth)["result"]["authenticated"], true);
  LineClient third = LineClient::tcp(endpoint, loopback(1));
  EXPECT_EQ(third.request(kAuth)["result"]["authenticated"], true);
  EXPECT_EQ(third.request(R"({"id":2,"cmd":"admin_only"})")["ok"], true);
  EXPECT_EQ(rejected("per_source"), 1);
  EXPECT_EQ(rejected("unauthenticated"), 1);
}

TEST_F(ControlServerBudgetTest, AConnectionWithoutItsAuthLineIsClosedAtTheDeadline) {
  config_.tcp.auth_timeout_ms = 200;
  start();
  auto t0 = std::chrono::steady_clock::now();
  LineClient silent = LineClient::tcp(*server_->tcp_endpoint(), loopback(2));
  EXPECT_TRUE(silent.wait_for_peer_close());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
  EXPECT_EQ(rejected("auth_timeout"), 1);
  await_open(0);
}

}  // namespace
}  // namespace ferry::control
