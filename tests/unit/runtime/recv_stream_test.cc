// RecvStream and send_all over real loopback sockets: a task echoes what it receives, on its
// home worker and from another worker (through the home's mailbox), byte-exact, and gives every
// buffer back to the ring.
#include "lib/runtime/recv_stream.hh"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "lib/runtime/io.hh"
#include "lib/runtime/runtime.hh"
#include "lib/uring/probe.hh"
#include "tests/unit/runtime/test_support.hh"

namespace ferry::runtime {
namespace {

using namespace std::chrono_literals;
using testing::Countdown;

struct EchoResult {
  std::atomic<std::uint64_t> echoed{0};
  std::atomic<int> end{-1};  // RecvBatch::End once finished
  std::atomic<bool> finished{false};
};

Task echo(Worker& home, int fd, EchoResult& result, Countdown* done) {
  RecvStream stream(home, fd);
  RecvBatch batch;
  std::vector<iovec> scratch;
  while (co_await stream.next(batch)) {
    const std::int64_t sent = co_await send_all(fd, batch.spans, scratch);
    if (sent < 0) break;
    result.echoed.fetch_add(static_cast<std::uint64_t>(sent));
  }
  result.end.store(static_cast<int>(batch.end));
  co_await stream.close(batch);
  result.finished.store(true);
  if (done != nullptr) done->count();
}

RuntimeConfig with_buffers(std::uint32_t workers, bool step_mode) {
  RuntimeConfig config;
  config.workers = workers;
  config.step_mode = step_mode;
  config.buffers = uring::BufferRingConfig{.count = 64, .buffer_bytes = 4096};
  const uring::UringFeatures& f = uring::kernel_features();
  config.recv_modes = uring::resolve_modes(uring::with_env_overrides({}), f);
  config.buffers->incremental = config.recv_modes.incremental;
  return config;
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Steps the given workers round-robin until `got` bytes came back on `client`.
std::vector<std::byte> step_until_echoed(Runtime& runtime, int client, std::size_t want,
                                         const std::vector<std::uint32_t>& workers) {
  std::vector<std::byte> got;
  std::byte buf[65536];
  for (int guard = 0; guard < 200000 && got.size() < want; ++guard) {
    for (std::uint32_t w : workers) runtime.step(w);
    const ssize_t n = ::read(client, buf, sizeof(buf));
    if (n > 0) got.insert(got.end(), buf, buf + n);
  }
  return got;
}

TEST(RecvStream, EchoesOnTheHomeWorkerAndGivesEveryBufferBack) {
  Runtime runtime(with_buffers(1, /*step_mode=*/true));
  runtime.start();
  testing::TcpPair pair = testing::tcp_pair();
  set_nonblocking(pair.client.get());
  EchoResult result;
  runtime.spawn_on(0, echo(runtime.worker(0), pair.server.get(), result, nullptr));

  std::vector<std::byte> message(100000);
  testing::fill_pattern(7, 0, message);
  std::size_t written = 0;
  std::vector<std::byte> got;
  std::byte buf[65536];
  for (int guard = 0; guard < 200000 && got.size() < message.size(); ++guard) {
    if (written < message.size()) {
      const ssize_t n =
          ::write(pair.client.get(), message.data() + written, message.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
    }
    runtime.step(0);
    const ssize_t n = ::read(pair.client.get(), buf, sizeof(buf));
    if (n > 0) got.insert(got.end(), buf, buf + n);
  }
  ASSERT_EQ(got.size(), message.size());
  EXPECT_EQ(testing::check_pattern(7, 0, got), got.size());
  EXPECT_EQ(runtime.worker(0).streams(), 1u);

  ::shutdown(pair.client.get(), SHUT_WR);
  for (int guard = 0; guard < 10000 && !result.finished.load(); ++guard) runtime.step(0);
  ASSERT_TRUE(result.finished.load());
  EXPECT_EQ(result.end.load(), static_cast<int>(RecvBatch::End::eof));
  EXPECT_EQ(result.echoed.load(), message.size());
  EXPECT_EQ(runtime.worker(0).streams(), 0u);
  EXPECT_EQ(runtime.worker(0).buffers().held_buffers(), 0u);
  EXPECT_EQ(runtime.live_tasks(), 0u);
  EXPECT_EQ(runtime.counters(0).home_requests.value(), 0u);
}

TEST(RecvStream, TaskOnAnotherWorkerReceivesThroughTheHomeMailbox) {
  Runtime runtime(with_buffers(2, /*step_mode=*/true));
  runtime.start();
  testing::TcpPair pair = testing::tcp_pair();
  set_nonblocking(pair.client.get());
  EchoResult result;
  // Homed on worker 0, run by worker 1: every next() is a request to worker 0's mailbox.
  runtime.spawn_on(1, echo(runtime.worker(0), pair.server.get(), result, nullptr));
  EXPECT_EQ(runtime.run_one(1), Worker::StepResult::ran);
  EXPECT_EQ(runtime.counters(1).home_requests.value(), 1u);
  EXPECT_EQ(runtime.worker(0).streams(), 0u);  // not started until worker 0 reads its mailbox
  runtime.poll(0);
  EXPECT_EQ(runtime.worker(0).streams(), 1u);

  std::vector<std::byte> message(5000);
  testing::fill_pattern(9, 0, message);
  testing::write_all(pair.client.get(), message);
  std::vector<std::byte> got =
      step_until_echoed(runtime, pair.client.get(), message.size(), {0, 1});
  ASSERT_EQ(got.size(), message.size());
  EXPECT_EQ(testing::check_pattern(9, 0, got), got.size());
  ::shutdown(pair.client.get(), SHUT_WR);
  for (int guard = 0; guard < 10000 && !result.finished.load(); ++guard) {
    runtime.step(0);
    runtime.step(1);
  }
  ASSERT_TRUE(result.finished.load());
  EXPECT_EQ(runtime.worker(0).buffers().held_buffers(), 0u);
  EXPECT_EQ(runtime.worker(0).streams(), 0u);
  EXPECT_EQ(runtime.live_tasks(), 0u);
}

TEST(RecvStream, ShutdownStreamsEndsTheirTasks) {
  Runtime runtime(with_buffers(1, /*step_mode=*/true));
  runtime.start();
  testing::TcpPair a = testing::tcp_pair();
  testing::TcpPair b = testing::tcp_pair();
  EchoResult ra;
  EchoResult rb;
  int owner_a = 0;
  // Give each stream an owner tag through a wrapper task.
  auto tagged = [](Worker& home, int fd, const void* owner, EchoResult& r) -> Task {
    RecvStream stream(home, fd, owner);
    RecvBatch batch;
    while (co_await stream.next(batch)) {
    }
    r.end.store(static_cast<int>(batch.end));
    co_await stream.close(batch);
    r.finished.store(true);
  };
  runtime.spawn_on(0, tagged(runtime.worker(0), a.server.get(), &owner_a, ra));
  runtime.spawn_on(0, echo(runtime.worker(0), b.server.get(), rb, nullptr));
  for (int i = 0; i < 10; ++i) runtime.step(0);
  ASSERT_EQ(runtime.worker(0).streams(), 2u);
  std::size_t n = 0;
  runtime.post(0, [&](Worker& w) { n = w.shutdown_streams(&owner_a); });
  for (int guard = 0; guard < 10000 && !ra.finished.load(); ++guard) runtime.step(0);
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(ra.finished.load());
  EXPECT_FALSE(rb.finished.load());
  EXPECT_EQ(runtime.worker(0).streams(), 1u);
}

struct Collected {
  std::uint64_t bytes = 0;
  bool released = false;
  bool finished = false;
};

// Keeps two batches (a message in two pieces), then gives both back at once.
Task collect_two(Worker& home, int fd, Collected& out) {
  RecvStream stream(home, fd);
  RecvBatch parts[2];
  for (RecvBatch& part : parts) {
    if (!co_await stream.next(part)) co_return;
    out.bytes += part.bytes;
  }
  co_await stream.release(parts);
  out.released = parts[0].spans.empty() && parts[1].spans.empty();
  co_await stream.close(parts[0]);
  out.finished = true;
}

TEST(RecvStream, ReleaseGivesCollectedBatchesBack) {
  Runtime runtime(with_buffers(2, /*step_mode=*/true));
  runtime.start();
  testing::TcpPair pair = testing::tcp_pair();
  Collected got;
  // Run by worker 1, homed on worker 0: the release is a home request too.
  runtime.spawn_on(1, collect_two(runtime.worker(0), pair.server.get(), got));
  // Larger than a buffer: at least one buffer is used up and held, incremental ring or not.
  std::vector<std::byte> piece(10000, std::byte{1});
  // Worker 0 only polls (reaps, serves its mailbox), never runs a task: every resumption lands
  // in its inbox and worker 1 steals it, so every stream operation is a home request. A single
  // ready task does not wake a sleeper (its worker would run it next), so a spawn from outside
  // nudges worker 1 awake each round.
  auto nudge = []() -> Task { co_return; };
  auto step_both = [&] {
    for (int i = 0; i < 20; ++i) {
      runtime.poll(0);
      runtime.spawn(nudge());
      runtime.step(1);
      runtime.step(1);
    }
  };
  step_both();
  testing::write_all(pair.client.get(), piece);
  step_both();
  EXPECT_EQ(got.bytes, piece.size());
  EXPECT_GE(runtime.worker(0).buffers().held_buffers(), 2u);  // the first piece is kept
  testing::write_all(pair.client.get(), piece);
  step_both();
  EXPECT_EQ(got.bytes, 2 * piece.size());
  EXPECT_TRUE(got.released);
  ::shutdown(pair.client.get(), SHUT_WR);
  step_both();
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(runtime.worker(0).buffers().held_buffers(), 0u);
  EXPECT_EQ(runtime.counters(1).home_requests.value(), 4u);  // next, next, release, close
  EXPECT_EQ(runtime.counters(0).tasks_run.value(), 0u);
}

// Many connections over real threads; the tasks get stolen, so receives hop home and sends run
// wherever the task is.
TEST(RecvStream, ThreadedEchoOfManyConnectionsIsByteExact) {
  constexpr int kConnections = 24;
  constexpr int kRounds = 40;
  Runtime runtime(with_buffers(2, /*step_mode=*/false));
  runtime.start();
  std::vector<testing::TcpPair> pairs;
  std::vector<std::unique_ptr<EchoResult>> results;
  Countdown done(kConnections);
  for (int i = 0; i < kConnections; ++i) {
    pairs.push_back(testing::tcp_pair());
    results.push_back(std::make_unique<EchoResult>());
    runtime.spawn(echo(runtime.worker(i % 2), pairs.back().server.get(), *results.back(), &done));
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      std::vector<std::byte> out;
      std::vector<std::byte> in;
      for (int round = 0; round < kRounds; ++round) {
        for (int c = t; c < kConnections; c += 4) {
          const std::size_t size =
              1 + (static_cast<std::size_t>(round * 7919 + c * 104729) % 70000);
          out.resize(size);
          in.resize(size);
          const std::uint64_t offset = static_cast<std::uint64_t>(round) << 20;
          testing::fill_pattern(c, offset, out);
          testing::write_all(pairs[c].client.get(), out);
          testing::read_exact(pairs[c].client.get(), in);
          if (testing::check_pattern(c, offset, in) != size) failures.fetch_add(1);
        }
      }
      for (int c = t; c < kConnections; c += 4) ::shutdown(pairs[c].client.get(), SHUT_WR);
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(done.wait_for(30s));
  for (auto& r : results) EXPECT_EQ(r->end.load(), static_cast<int>(RecvBatch::End::eof));
  runtime.stop();
  EXPECT_EQ(runtime.live_tasks(), 0u);
}

}  // namespace
}  // namespace ferry::runtime
