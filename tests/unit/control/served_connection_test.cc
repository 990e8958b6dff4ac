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
#include <utility>
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
    timeval timeout{10, 0};      // a server that never answers fails the test instead of hanging it
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

  // Sends `lines` as root and expects one answer each: the (id, error code) given, or ok where
  // the code is empty; and no handover taken.
  void expect_root_answers(const std::vector<std::string>& lines,
                           const std::vector<std::pair<json, std::string>>& expected) {
    std::string sent;
    for (const std::string& line : lines) sent += line + "\n";
    std::vector<json> r = converse(unix_peer(0), Transport::unix_socket, sent);
    ASSERT_EQ(r.size(), expected.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(r[i]["id"], expected[i].first) << lines[i];
      if (expected[i].second.empty()) {
        EXPECT_EQ(r[i]["ok"], true) << lines[i] << ": " << r[i];
      } else {
        EXPECT_EQ(r[i]["error"]["code"], expected[i].second) << lines[i] << ": " << r[i];
      }
    }
    EXPECT_EQ(takes_.load(), 0);
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
  expect_root_answers(
      {R"({"id":1,"cmd":42})", R"({"id":2,"cmd":["handover"]})", R"({"id":3,"cmd":{"handover":1}})",
       R"({"id":4,"cmd":null})", R"({"id":5,"cmd":true})", R"({"id":6,"cmd":"help"})"},
      {{1, "bad_request"},
       {2, "bad_request"},
       {3, "bad_request"},
       {4, "bad_request"},
       {5, "bad_request"},
       {6, ""}});
}

// Issue 23, found by fuzz_control_server: the taker took any object whose "cmd" was "handover",
// so a malformed one from root lost its connection to the upgrade instead of getting its error.
TEST_F(ServedConnectionTest, AnAdminsHandoverThatTheProtocolRefusesIsAnsweredNotTaken) {
  expect_root_answers(
      {R"({"id":"x","cmd":"handover"})", R"({"id":1,"cmd":"handover","args":[]})",
       R"({"id":2,"cmd":"handover","extra":true})", R"({"id":3,"cmd":"handover","args":"now"})",
       R"({"id":4,"cmd":"help"})"},
      {{nullptr, "bad_request"}, {1, "bad_args"}, {2, "bad_request"}, {3, "bad_args"}, {4, ""}});
}

TEST_F(ServedConnectionTest, AWellFormedHandoverWithAnIdAndArgsIsTakenUnanswered) {
  std::vector<json> r = converse(unix_peer(0), Transport::unix_socket,
                                 R"({"id":7,"cmd":"handover","args":{}})"
                                 "\n"
                                 R"({"id":8,"cmd":"help"})"
                                 "\n");
  EXPECT_TRUE(r.empty()) << r.size() << " responses";
  EXPECT_EQ(takes_.load(), 1);
}

}  // namespace
}  // namespace ferry::control
