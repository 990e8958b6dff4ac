// ListenerGroup while it closes: a connection the kernel accepted for a worker just before the
// cancel reached its accept goes to the sink, not back to the client as a reset. An upgrade closes
// the old ferryd's accepts while the new one already listens on the same sockets, so no client
// may notice (test_upgrade saw one reset in 406 new connections before this was fixed).
#include "lib/tcp/listener_group.hh"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "tests/unit/runtime/test_support.hh"

namespace ferry::tcp {
namespace {

using namespace std::chrono_literals;
namespace rt = ferry::runtime::testing;

// Keeps what it is given open, so a client can tell a served connection from a reset one.
class KeepingSink : public AcceptSink {
 public:
  void accepted(runtime::Worker&, UniqueFd connection) override {
    std::lock_guard lock(mutex_);
    kept_.push_back(std::move(connection));
    ++total_;
    cv_.notify_all();
  }
  void accept_failed(runtime::Worker&, int) override { failures_.fetch_add(1); }

  std::size_t total() const {
    std::lock_guard lock(mutex_);
    return total_;
  }
  int failures() const { return failures_.load(); }
  // False when the total did not reach `n` within `timeout`.
  bool wait_total(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return total_ >= n; });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<UniqueFd> kept_;
  std::size_t total_ = 0;
  std::atomic<int> failures_{0};
};

// True when the peer reset the connection; a served one has nothing to read yet.
bool was_reset(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  return n < 0 && errno == ECONNRESET;
}

// Clients that connect and send a byte, back to back, as many as the test allows.
class Connector {
 public:
  explicit Connector(std::uint16_t port)
      : thread_([this, port] {
          for (;;) {
            {
              std::unique_lock lock(mutex_);
              cv_.wait(lock, [&] { return stop_ || allowed_ > 0; });
              if (stop_) return;
              --allowed_;
            }
            UniqueFd c = rt::connect_loopback(port);
            const char byte = 'x';
            if (::send(c.get(), &byte, 1, MSG_NOSIGNAL) != 1) send_failures_.fetch_add(1);
            std::lock_guard lock(mutex_);
            clients_.push_back(std::move(c));
          }
        }) {}
  ~Connector() { stop(); }
  void allow(std::size_t n) {
    std::lock_guard lock(mutex_);
    allowed_ += n;
    cv_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }
  // The clients so far, handed over to the caller.
  std::vector<UniqueFd> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(clients_, {});
  }
  int send_failures() const { return send_failures_.load(); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::size_t allowed_ = 0;
  std::vector<UniqueFd> clients_;
  std::atomic<int> send_failures_{0};
  std::thread thread_;
};

TEST(ListenerGroup, ConnectionsAcceptedWhileClosingReachTheSinkNotAReset) {
  // Every connection stays open to the end (both ends: a server end closed with the client's byte
  // unread would reset it): two fds per client, kPerRound clients a round.
  constexpr int kRounds = 20;
  constexpr std::size_t kPerRound = 50;
  constexpr std::size_t kMaxClients = kRounds * kPerRound;
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  files.rlim_cur = files.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  ASSERT_GE(files.rlim_cur, 2 * kMaxClients + 64) << "the hard limit of open files is too low";
  // Declared before the runtime, so that a failed assertion stops the workers (and their
  // accepts) before the group and the sink go.
  KeepingSink sink;
  std::unique_ptr<ListenerGroup> group;
  runtime::RuntimeConfig config;
  config.workers = 1;
  runtime::Runtime runtime(config);
  runtime.start();

  // The "new ferryd": a copy of the listening socket that outlives every group, as a handover's
  // does; what is still in the accept queue after the last group closed is accepted from it.
  group = std::make_unique<ListenerGroup>(*net::Endpoint::parse("127.0.0.1:0"),
                                          ListenerMode::reuseport, 1, true, sink);
  group->listen(runtime);
  UniqueFd held(::dup(group->fds().front()));
  ASSERT_TRUE(held);
  Connector connector(group->bound().port);

  // Rounds of the upgrade's pattern: a group accepts from the socket, closes while clients keep
  // connecting, and the next group takes the same socket over. Once a group's close() returned,
  // every client so far was either handed to the sink or still waits in the queue: none may have
  // been reset.
  std::size_t clients = 0;
  std::size_t resets = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::size_t before = sink.total();
    connector.allow(kPerRound);
    ASSERT_TRUE(sink.wait_total(before + 5, 5s)) << "round " << round;
    ASSERT_TRUE(group->close(runtime, 5s)) << "round " << round;
    for (const UniqueFd& c : connector.take()) {
      ++clients;
      resets += was_reset(c.get()) ? 1 : 0;
    }
    group = std::make_unique<ListenerGroup>(*net::Endpoint::parse("127.0.0.1:0"),
                                            ListenerMode::reuseport, 1, true, sink);
    std::vector<UniqueFd> inherited;
    inherited.emplace_back(::dup(held.get()));
    group->listen(runtime, std::move(inherited));
  }
  connector.stop();
  ASSERT_TRUE(group->close(runtime, 5s));
  for (const UniqueFd& c : connector.take()) {
    ++clients;
    resets += was_reset(c.get()) ? 1 : 0;
  }
  std::size_t queued = 0;
  for (;;) {
    UniqueFd c(::accept4(held.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c) break;
    ++queued;
  }
  EXPECT_EQ(resets, 0u) << "of " << clients << " clients";
  EXPECT_EQ(sink.total() + queued, clients) << "accepted " << sink.total() << ", queued " << queued;
  EXPECT_EQ(sink.failures(), 0);
  EXPECT_EQ(connector.send_failures(), 0);
  runtime.stop();
}

}  // namespace
}  // namespace ferry::tcp
