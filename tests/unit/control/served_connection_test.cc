// ControlServer::serve(): a socketpair end served as an accepted connection from a peer the test
// picks, so requests from root, from a uid without admin access and from a TCP client run the
// server's whole path without a second uid. Also the regressions of issue 23 found that way.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <string>
#include <vector>

#include "lib/common/unique_fd.hh"
#include "lib/control/protocol.hh"
#include "lib/control/server.hh"
#include "tests/unit/control/server_fixture.hh"

namespace ferry::control {
namespace {

using nlohmann::json;

constexpr uid_t kOtherUid = 65534;

class ServedConnectionTest : public testing::ControlServerTcpTest {
 protected:
  void SetUp() override {
    ControlServerTcpTest::SetUp();
    make_server();
    server_->set_socket_taker("handover", [this](UniqueFd, const Peer&) { ++takes_; });
    start();
  }

  // Sends `lines`, half-closes, and returns every response line until the server closes.
  std::vector<json> converse(const Peer& peer, Transport transport, const std::string& lines) {
    int pair[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    UniqueFd client(pair[1]);
    std::promise<void> served;
    boost::asio::post(io_, [&] {
      server_->serve(UniqueFd(pair[0]), peer, transport);
      served.set_value();
    });
    served.get_future().wait();  // serve() belongs on the io thread
    timeval timeout{10, 0};  // a server that never answers fails the test instead of hanging it
    ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    EXPECT_EQ(::send(client.get(), lines.data(), lines.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(lines.size()));
    ::shutdown(client.get(), SHUT_WR);
    std::string received;
    char chunk[4096];
    for (ssize_t n; (n = ::recv(client.get(), chunk, sizeof chunk, 0)) > 0;) {
      received.append(chunk, static_cast<std::size_t>(n));
    }
    std::vector<json> out;
    for (std::size_t start = 0, end; (end = received.find('\n', start)) != std::string::npos;
         start = end + 1) {
      out.push_back(json::parse(received.substr(start, end - start)));
    }
    return out;
  }

  static Peer unix_peer(uid_t uid) {
    Peer peer;
    peer.pid = ::getpid();
    peer.uid = uid;
    return peer;
  }

  std::atomic<int> takes_{0};
};

TEST_F(ServedConnectionTest, ServesEachPeerWithItsOwnAccess) {
  const std::string lines = R"({"id":1,"cmd":"admin_only"})"
                            "\n";
  EXPECT_EQ(converse(unix_peer(0), Transport::unix_socket, lines)[0]["ok"], true);
  EXPECT_EQ(converse(unix_peer(::getuid()), Transport::unix_socket, lines)[0]["ok"], true)
      << "the daemon's own uid";
  std::vector<json> other = converse(unix_peer(kOtherUid), Transport::unix_socket, lines);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0]["error"]["code"], "permission_denied");
}

TEST_F(ServedConnectionTest, ATcpPeerAuthenticatesFirstAndIsThenAnAdmin) {
  std::vector<json> wrong = converse(Peer{}, Transport::tcp,
                                     R"({"auth":"nope"})"
                                     "\n"
                                     R"({"id":1,"cmd":"admin_only"})"
                                     "\n");
  ASSERT_EQ(wrong.size(), 1u) << "closed after the failed auth";
  EXPECT_EQ(wrong[0]["error"]["code"], "unauthorized");
  std::vector<json> right = converse(Peer{}, Transport::tcp,
                                     R"({"auth":"s3cret"})"
                                     "\n"
                                     R"({"id":1,"cmd":"admin_only"})"
                                     "\n");
  ASSERT_EQ(right.size(), 2u);
  EXPECT_EQ(right[0]["result"]["authenticated"], true);
  EXPECT_EQ(right[1]["result"]["done"], true);
}

TEST_F(ServedConnectionTest, ServingBeforeStartIsRefused) {
  boost::asio::io_context io;
  ControlServer unstarted(io, config_, table_, policy_, registry_);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd client(pair[1]);
  EXPECT_THROW(unstarted.serve(UniqueFd(pair[0]), unix_peer(0), Transport::unix_socket),
               std::logic_error);
}

// Issue 23: {"id":1,"cmd":42} from an admin peer ended ferryd (the handover taker read "cmd" as
// a string). Every such line is a bad_request with its id, and the connection serves on.
TEST_F(ServedConnectionTest, AnAdminsCmdThatIsNotAStringIsABadRequestAndTheConnectionServesOn) {
  std::vector<json> r = converse(unix_peer(0), Transport::unix_socket,
                                 R"({"id":1,"cmd":42})"
                                 "\n"
                                 R"({"id":2,"cmd":["handover"]})"
                                 "\n"
                                 R"({"id":3,"cmd":{"handover":1}})"
                                 "\n"
                                 R"({"id":4,"cmd":null})"
                                 "\n"
                                 R"({"id":5,"cmd":true})"
                                 "\n"
                                 R"({"id":6,"cmd":"help"})"
                                 "\n");
  ASSERT_EQ(r.size(), 6u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r[i]["id"], i + 1);
    EXPECT_EQ(r[i]["error"]["code"], "bad_request") << r[i];
  }
  EXPECT_EQ(r[5]["ok"], true);
  EXPECT_EQ(takes_.load(), 0);
}

}  // namespace
}  // namespace ferry::control
