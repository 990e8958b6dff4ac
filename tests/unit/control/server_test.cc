// A real ControlServer in a temp dir, driven over its Unix socket (and TCP listener) by blocking
// clients while its io_context runs on a thread of its own (server_fixture.hh).
#include "lib/control/server.hh"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <stdexcept>
#include <thread>

#include "lib/common/unique_fd.hh"
#include "lib/control/protocol.hh"
#include "tests/unit/control/server_fixture.hh"

namespace ferry::control {
namespace {

using nlohmann::json;
using testing::ControlServerTcpTest;
using testing::ControlServerTest;
using testing::LineClient;

TEST_F(ControlServerTest, AnswersPipelinedRequestsInOrder) {
  start();
  LineClient c = client();
  // More than the 64 a connection may have unanswered: the rest waits in the server's buffer.
  std::string batch;
  for (int i = 0; i < 300; ++i) {
    batch += json{{"id", i}, {"cmd", "echo"}, {"args", {{"n", i * 3}}}}.dump() + "\n";
  }
  c.send(batch);
  for (int i = 0; i < 300; ++i) {
    json r = c.read_json();
    ASSERT_EQ(r["id"], i);
    ASSERT_EQ(r["result"]["n"], i * 3);
  }
  EXPECT_EQ(counter("ferry_control_requests_total", {{"cmd", "echo"}, {"result", "ok"}}), 300);
}

TEST_F(ControlServerTest, SeesThePeerCredentials) {
  start();
  LineClient c = client();
  json r = c.request(R"({"id":1,"cmd":"whoami"})");
  EXPECT_EQ(r["result"]["pid"], ::getpid());
  EXPECT_EQ(r["result"]["uid"], ::getuid());
  EXPECT_EQ(r["result"]["tcp"], false);
  // The test's own uid is the policy's daemon uid.
  EXPECT_EQ(c.request(R"({"id":2,"cmd":"admin_only"})")["ok"], true);
}

TEST_F(ControlServerTest, ClosesTheConnectionAfterATooLargeLine) {
  start();
  LineClient c = client();
  c.send(R"({"id":1,"cmd":"echo","args":{"s":")" + std::string(kMaxRequestBytes + 100, 'a'));
  json r = c.read_json();
  EXPECT_TRUE(r["id"].is_null());
  EXPECT_EQ(r["ok"], false);
  EXPECT_EQ(r["error"]["code"], "too_large");
  EXPECT_EQ(c.read_line(), std::nullopt);
  EXPECT_EQ(counter("ferry_control_bad_requests_total", {{"reason", "too_large"}}), 1);
}

TEST_F(ControlServerTest, AnswersGarbageWithBadRequestAndKeepsServing) {
  start();
  LineClient c = client();
  c.send(std::string("\x00\xff\xfe\x01 binary\n", 13) + "not json\r\n" + "\n" + "   \r\n" +
         R"({"id":1,"cmd":"help"})" + "\r\n");
  for (int i = 0; i < 2; ++i) {
    json r = c.read_json();  // valid JSON although the message quotes invalid UTF-8
    EXPECT_TRUE(r["id"].is_null());
    EXPECT_EQ(r["error"]["code"], "bad_request");
  }
  json r = c.read_json();
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(r["result"]["commands"].size(), 5u);
  EXPECT_EQ(counter("ferry_control_bad_requests_total", {{"reason", "bad_request"}}), 2);
  EXPECT_EQ(counter("ferry_control_requests_total", {{"cmd", "unknown"}, {"result", "error"}}), 2);
  EXPECT_EQ(counter("ferry_control_requests_total", {{"cmd", "help"}, {"result", "ok"}}), 1);
}

TEST_F(ControlServerTest, AnswersAClientThatHalfClosesAfterItsLastRequest) {
  start();
  LineClient c = client();
  c.send(R"({"id":1,"cmd":"echo","args":{"n":1}})"
         "\n"
         R"({"id":2,"cmd":"nope"})"
         "\n"
         R"({"id":3,"cmd":"echo","args":{"n":3}})");  // the last one without a newline
  c.shutdown_write();
  EXPECT_EQ(c.read_json()["result"]["n"], 1);
  EXPECT_EQ(c.read_json()["error"]["code"], "unknown_command");
  EXPECT_EQ(c.read_json()["result"]["n"], 3);
  EXPECT_EQ(c.read_line(), std::nullopt);
}

TEST_F(ControlServerTest, CreatesTheDirectoryAndAppliesTheMode) {
  config_.mode = 0600;
  start();
  struct stat st {};
  ASSERT_EQ(::lstat(config_.socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(ControlServerTest, ReplacesAStaleSocketFile) {
  std::filesystem::create_directories(dir_ + "/run");
  {
    // Bound and closed without ever listening: what a crashed daemon leaves behind.
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, config_.socket.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  start();
  EXPECT_EQ(client().request(R"({"id":1,"cmd":"help"})")["ok"], true);
}

TEST_F(ControlServerTest, RefusesToStartWhileAnotherServerAnswers) {
  start();
  ControlServer second(io_, config_, table_, policy_, registry_);
  try {
    second.start();
    FAIL() << "second server started";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "control.socket " + config_.socket +
                                         ": another ferryd is already running (pid " +
                                         std::to_string(::getpid()) + ")");
  }
  // The first server's socket is untouched and still answers.
  EXPECT_EQ(client().request(R"({"id":1,"cmd":"help"})")["ok"], true);
}

TEST_F(ControlServerTest, RefusesASymlinkAtTheSocketPath) {
  std::filesystem::create_directories(dir_ + "/run");
  std::string target = dir_ + "/elsewhere";
  ASSERT_EQ(::symlink(target.c_str(), config_.socket.c_str()), 0);
  std::string error = start_error();
  EXPECT_NE(error.find("control.socket " + config_.socket + ": is a symbolic link"),
            std::string::npos)
      << error;
  struct stat st {};
  ASSERT_EQ(::lstat(config_.socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_NE(::lstat(target.c_str(), &st), 0);
}

TEST_F(ControlServerTest, RefusesAFileThatIsNotASocket) {
  std::filesystem::create_directories(dir_ + "/run");
  std::ofstream(config_.socket) << "precious";
  std::string error = start_error();
  EXPECT_NE(error.find("exists and is not a socket"), std::string::npos) << error;
  std::ifstream in(config_.socket);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST_F(ControlServerTest, RemovesTheSocketFileOnStop) {
  start();
  stop_io();
  server_->stop();
  struct stat st {};
  EXPECT_NE(::lstat(config_.socket.c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(ControlServerTest, LeavesAReplacedSocketFileAloneOnStop) {
  start();
  stop_io();
  ASSERT_EQ(::unlink(config_.socket.c_str()), 0);
  std::ofstream(config_.socket) << "someone else's";
  server_->stop();
  struct stat st {};
  EXPECT_EQ(::lstat(config_.socket.c_str(), &st), 0);
}

TEST_F(ControlServerTest, DisconnectsAClientThatNeverReads) {
  start();
  LineClient c = client();
  std::string batch;
  constexpr int kRequests = 60;  // 60 x 256 KiB: far beyond the 1 MiB output cap
  for (int i = 0; i < kRequests; ++i) {
    batch += json{{"id", i}, {"cmd", "big"}, {"args", {{"bytes", 256 * 1024}}}}.dump() + "\n";
  }
  c.send(batch);
  ASSERT_TRUE(c.wait_for_peer_close());
  EXPECT_EQ(counter("ferry_control_rejected_connections_total", {{"reason", "slow_reader"}}), 1);
  EXPECT_EQ(server_->open_connections(), 0u);
  // What the kernel had already taken is still readable, then the stream ends short.
  int answered = 0;
  while (auto line = c.read_line()) {
    EXPECT_EQ(json::parse(*line)["id"], answered);
    ++answered;
  }
  EXPECT_LT(answered, kRequests);
}

TEST_F(ControlServerTest, ClosesIdleConnections) {
  make_server().set_idle_timeout(std::chrono::milliseconds(50));
  start();
  LineClient c = client();
  EXPECT_EQ(c.request(R"({"id":1,"cmd":"help"})")["ok"], true);
  EXPECT_EQ(c.read_line(), std::nullopt);
  EXPECT_EQ(server_->open_connections(), 0u);
}

TEST_F(ControlServerTest, RefusesConnectionsOverTheLimit) {
  config_.max_connections = 2;
  config_.admin_reserved_connections = 1;
  start();
  LineClient a = client();
  LineClient b = client();
  EXPECT_EQ(a.request(R"({"id":1,"cmd":"help"})")["ok"], true);
  EXPECT_EQ(b.request(R"({"id":1,"cmd":"help"})")["ok"], true);
  EXPECT_EQ(server_->open_connections(), 2u);
  LineClient third = client();  // the kernel completes the connect; the server closes it
  EXPECT_EQ(third.read_line(), std::nullopt);
  EXPECT_EQ(counter("ferry_control_rejected_connections_total", {{"reason", "limit"}}), 1);
  EXPECT_EQ(counter("ferry_control_connections_total", {{"transport", "unix"}}), 2);
  EXPECT_EQ(counter("ferry_control_connections_open", {}), 2);
}

TEST_F(ControlServerTest, ClosesEverythingOnStop) {
  start();
  LineClient c = client();
  EXPECT_EQ(c.request(R"({"id":1,"cmd":"help"})")["ok"], true);
  stop_io();
  server_->stop();
  EXPECT_EQ(server_->open_connections(), 0u);
  EXPECT_EQ(c.read_line(), std::nullopt);
  EXPECT_THROW(LineClient::unix_socket(config_.socket), std::runtime_error);
}

// What a taker got: the connection's socket and who asked, handed from the io thread.
struct TakenSocket {
  UniqueFd fd;
  Peer peer;
};

class ControlServerHandoverTest : public ControlServerTest {
 protected:
  // Installs a taker for "handover" that passes what it gets to taken_.
  void take_handover_requests() {
    server_->set_socket_taker("handover", [this](UniqueFd fd, const Peer& peer) {
      ++takes_;
      taken_.set_value(TakenSocket{std::move(fd), peer});
    });
  }

  // The taker's socket, once it has been called (10 s at most, so a broken server fails).
  TakenSocket await_taken() {
    auto future = taken_.get_future();
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      throw std::runtime_error("the taker was not called within 10 s");
    }
    return future.get();
  }

  // Runs `f` on the io thread (where the server's calls belong) and waits for it.
  template <typename F>
  void on_io_thread(F f) {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  // A listening Unix socket bound at the configured path, as the previous ferryd left it.
  UniqueFd listen_at_socket_path() {
    std::filesystem::create_directories(dir_ + "/run");
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, config_.socket.c_str(), sizeof addr.sun_path - 1);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd.get(), 16) != 0) {
      throw std::runtime_error(std::string("bind/listen: ") + std::strerror(errno));
    }
    return fd;
  }

  std::atomic<int> takes_{0};
  std::promise<TakenSocket> taken_;
};

TEST_F(ControlServerHandoverTest, AnAdminsHandoverRequestHandsItsSocketToTheTakerUnanswered) {
  make_server();
  take_handover_requests();
  start();
  LineClient c = client();
  c.send(R"({"cmd":"handover"})"
         "\n");
  TakenSocket taken = await_taken();
  ASSERT_TRUE(taken.fd);
  EXPECT_EQ(taken.peer.uid, ::getuid());
  EXPECT_EQ(taken.peer.pid, ::getpid());
  EXPECT_FALSE(taken.peer.tcp);
  EXPECT_EQ(::fcntl(taken.fd.get(), F_GETFL) & O_NONBLOCK, 0) << "the taker's copy blocks";
  EXPECT_EQ(::fcntl(taken.fd.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);

  // The connection is the taker's now, both ways: raw bytes, no line protocol.
  c.send("from the successor\n");
  char got[64] = {};
  ASSERT_EQ(::recv(taken.fd.get(), got, sizeof got, 0), 19);
  EXPECT_EQ(std::string(got, 19), "from the successor\n");
  const std::string raw = "handover frame\n";
  ASSERT_EQ(::send(taken.fd.get(), raw.data(), raw.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(raw.size()));
  taken.fd.reset();  // with the server's own end closed too, the stream ends here
  EXPECT_EQ(c.read_line(), "handover frame") << "the taker's bytes, and no JSON response first";
  EXPECT_EQ(c.read_line(), std::nullopt) << "nothing after them either";
  EXPECT_EQ(takes_.load(), 1);
}

TEST_F(ControlServerHandoverTest, OtherCommandsAreAnsweredAsUsualWhileATakerIsSet) {
  make_server();
  take_handover_requests();
  start();
  LineClient c = client();
  EXPECT_EQ(c.request(R"({"id":1,"cmd":"echo","args":{"cmd":"handover"}})")["result"]["cmd"],
            "handover");
  EXPECT_EQ(c.request(R"({"id":2,"cmd":"admin_only"})")["result"]["done"], true);
  EXPECT_EQ(c.request(R"({"id":3,"cmd":"handoverx"})")["error"]["code"], "unknown_command");
  EXPECT_EQ(c.request("[\"handover\"]")["error"]["code"], "bad_request");
  EXPECT_EQ(takes_.load(), 0);
}

// An admin peer's "cmd" of any JSON type reaches the taker's check: only the string "handover"
// is taken, everything else is the table's to answer (bad_request), and the server serves on.
TEST_F(ControlServerHandoverTest, ACmdThatIsNotAStringIsABadRequestNotACrash) {
  make_server();
  take_handover_requests();
  start();
  LineClient c = client();
  for (const char* line :
       {R"({"id":1,"cmd":42})", R"({"id":2,"cmd":["handover"]})", R"({"id":3,"cmd":{"a":1}})",
        R"({"id":4,"cmd":null})", R"({"id":5,"cmd":true})", R"({"id":6,"cmd":4.5})"}) {
    json r = c.request(line);
    EXPECT_EQ(r["ok"], false) << line;
    EXPECT_EQ(r["error"]["code"], "bad_request") << line;
  }
  EXPECT_EQ(c.request(R"({"id":7,"cmd":"help"})")["ok"], true) << "the connection stays";
  EXPECT_EQ(takes_.load(), 0);
}

TEST_F(ControlServerHandoverTest, WithoutATakerTheCommandTablesAnswerComesBack) {
  table_.add("handover", Access::admin, "the table's own", [](const json&, const Peer&) {
    return json{{"from", "table"}};
  });
  start();
  LineClient c = client();
  json r = c.request(R"({"id":4,"cmd":"handover"})");
  EXPECT_EQ(r["id"], 4);
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(r["result"]["from"], "table");
  EXPECT_EQ(c.request(R"({"id":5,"cmd":"help"})")["ok"], true) << "the connection stays";
}

TEST_F(ControlServerHandoverTest, AServerOnAnInheritedSocketAcceptsOnItAndKeepsItsFile) {
  UniqueFd inherited = listen_at_socket_path();
  const int inherited_fd = inherited.get();
  struct stat before {};
  ASSERT_EQ(::stat(config_.socket.c_str(), &before), 0);
  // A client that connected to the predecessor's listener, waiting in its accept queue.
  LineClient early = client();

  make_server().inherit(std::move(inherited), UniqueFd());
  start();
  EXPECT_EQ(server_->unix_fd(), inherited_fd) << "the inherited socket, not a new one";
  struct stat after {};
  ASSERT_EQ(::stat(config_.socket.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the socket file was not replaced";
  EXPECT_EQ(early.request(R"({"id":1,"cmd":"help"})")["ok"], true);
  EXPECT_EQ(client().request(R"({"id":2,"cmd":"whoami"})")["result"]["uid"], ::getuid());

  // It is this server's file now: stop() removes it.
  stop_io();
  server_->stop();
  struct stat gone {};
  EXPECT_NE(::lstat(config_.socket.c_str(), &gone), 0);
}

TEST_F(ControlServerHandoverTest, StopAcceptingKeepsOpenConnectionsAndLeavesTheFileToTheSuccessor) {
  start();
  LineClient open = client();
  EXPECT_EQ(open.request(R"({"id":1,"cmd":"help"})")["ok"], true);
  ASSERT_GE(server_->unix_fd(), 0);
  // The successor's copy of the listener, as the handover passes it on.
  UniqueFd successor(::fcntl(server_->unix_fd(), F_DUPFD_CLOEXEC, 0));
  ASSERT_TRUE(successor);

  on_io_thread([this] { server_->stop_accepting(); });
  EXPECT_EQ(server_->unix_fd(), -1);
  EXPECT_EQ(open.request(R"({"id":2,"cmd":"echo","args":{"n":2}})")["result"]["n"], 2)
      << "an open connection is still served";

  // A new client lands in the successor's accept queue, not in this server.
  LineClient late = client();
  pollfd ready{successor.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&ready, 1, 10000), 1) << "the new client waits for the successor";
  UniqueFd accepted(::accept4(successor.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  EXPECT_TRUE(accepted) << std::strerror(errno);

  stop_io();
  server_->stop();
  struct stat st {};
  EXPECT_EQ(::lstat(config_.socket.c_str(), &st), 0) << "the socket file stays for the successor";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
}

TEST_F(ControlServerTcpTest, AGoodTokenOpensTheLineProtocolWithAdminAccess) {
  start();
  ASSERT_TRUE(server_->tcp_endpoint());
  EXPECT_NE(server_->tcp_endpoint()->port, 0);
  LineClient c = tcp_client();
  c.send(R"({"auth":"s3cret"})"
         "\n"
         R"({"id":1,"cmd":"whoami"})"
         "\n");
  EXPECT_EQ(c.read_line(), R"({"id":null,"ok":true,"result":{"authenticated":true}})");
  EXPECT_EQ(c.read_json()["result"]["tcp"], true);
  EXPECT_EQ(c.request(R"({"id":2,"cmd":"admin_only"})")["ok"], true);
  EXPECT_EQ(counter("ferry_control_connections_total", {{"transport", "tcp"}}), 1);
}

TEST_F(ControlServerTcpTest, AWrongTokenIsRejectedAndClosed) {
  start();
  LineClient c = tcp_client();
  json r = c.request(R"({"auth":"guess"})");
  EXPECT_TRUE(r["id"].is_null());
  EXPECT_EQ(r["ok"], false);
  EXPECT_EQ(r["error"]["code"], "unauthorized");
  EXPECT_EQ(c.read_line(), std::nullopt);
  EXPECT_EQ(counter("ferry_control_rejected_connections_total", {{"reason", "auth"}}), 1);
}

TEST_F(ControlServerTcpTest, ARequestBeforeAuthIsRejected) {
  start();
  LineClient c = tcp_client();
  EXPECT_EQ(c.request(R"({"id":1,"cmd":"help"})")["error"]["code"], "unauthorized");
  EXPECT_EQ(c.read_line(), std::nullopt);
}

TEST_F(ControlServerTcpTest, TurnsAwayASourceAfterRepeatedFailures) {
  start();
  for (int i = 0; i < 5; ++i) {
    LineClient c = tcp_client();
    EXPECT_EQ(c.request(R"({"auth":"guess"})")["error"]["code"], "unauthorized");
  }
  // Even the right token is not heard now: the connection is closed before any line is read.
  LineClient c = tcp_client();
  c.send(R"({"auth":"s3cret"})"
         "\n");
  EXPECT_EQ(c.read_line(), std::nullopt);
  EXPECT_EQ(counter("ferry_control_rejected_connections_total", {{"reason", "auth"}}), 6);
}

TEST_F(ControlServerTcpTest, AHandoverRequestOverTcpIsNotHandedToTheTaker) {
  make_server();
  int takes = 0;
  server_->set_socket_taker("handover", [&takes](UniqueFd, const Peer&) { ++takes; });
  start();
  LineClient c = tcp_client();
  EXPECT_EQ(c.request(R"({"auth":"s3cret"})")["ok"], true);
  EXPECT_EQ(c.request(R"({"id":1,"cmd":"handover"})")["error"]["code"], "unknown_command");
  stop_io();
  EXPECT_EQ(takes, 0);
}

TEST_F(ControlServerTcpTest, RefusesATokenFileOthersCanRead) {
  write_token("s3cret\n", 0644);
  std::string error = start_error();
  EXPECT_NE(error.find("control.tcp.token_file " + *config_.tcp.token_file + ": mode 0644"),
            std::string::npos)
      << error;
  // Refused before anything was created.
  struct stat st {};
  EXPECT_NE(::lstat(config_.socket.c_str(), &st), 0);
}

TEST_F(ControlServerTcpTest, RefusesAMissingOrEmptyTokenFile) {
  write_token("\n", 0600);
  EXPECT_NE(start_error().find("is empty"), std::string::npos);
  std::filesystem::remove(*config_.tcp.token_file);
  EXPECT_NE(start_error().find("does not exist"), std::string::npos);
  config_.tcp.token_file = std::nullopt;
  EXPECT_NE(start_error().find("control.tcp.token_file is not"), std::string::npos);
}

}  // namespace
}  // namespace ferry::control
