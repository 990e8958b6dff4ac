// The engine's look at quiet recvs (RecvLimits::check_drained), against the real kernel over TCP
// loopback. A multishot recv that drained its socket waits for a wakeup; a kernel can lose one
// when a segment lands while the recv copies (6.18 with bundles), and the recv then sleeps with
// bytes in its socket. The tests make the same state without the race: the ring is
// SINGLE_ISSUER|DEFER_TASKRUN, so the wakeup of bytes sent between two entries into the kernel
// is task work nobody ran yet when check_quiet() looks.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <vector>

#include "lib/uring/recv_engine.hh"
#include "tests/unit/uring/loopback.hh"

namespace ferry::uring {
namespace {

using testing::RecvHarness;
using testing::StreamVerifier;
using State = RecvSocket::State;
using Kind = RecvEvent::Kind;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kKiB = 1024;
constexpr RecvLimits kLimits{.socket_cap_bytes = 64 * kKiB, .min_bytes = 4 * kKiB};
// Several segments' worth: a completion this large is listed (RecvLimits::quiet_min_bytes).
constexpr std::size_t kPiece = 8 * kKiB;

// One socket whose bytes are checked and given back as they come.
struct QuietRun {
  RecvHarness h;
  testing::TcpPair pair = testing::tcp_pair();
  RecvSocket socket{pair.server.get(), 5};
  StreamVerifier verifier{7};
  std::uint64_t sent = 0;
  std::uint64_t canceled_events = 0;

  explicit QuietRun(const RecvLimits& limits = kLimits)
      : h(BufferRingConfig{64, 16 * kKiB, 0, true}, RecvModes{true, true, true}, limits) {
    h.watch(socket, [this](RecvSocket&, const RecvEvent& event) {
      if (event.kind == Kind::canceled) ++canceled_events;
      if (event.kind != Kind::data) return;
      verifier.check(event.spans);
      h.engine.release(event.spans);
    });
  }
  void send(std::size_t bytes) {
    std::vector<std::byte> chunk(bytes);
    testing::fill_stream(7, sent, chunk);
    ASSERT_EQ(::send(pair.client.get(), chunk.data(), chunk.size(), 0),
              static_cast<ssize_t>(chunk.size()));
    sent += bytes;
  }
  bool all_received() {
    return h.run_until([this] { return verifier.offset == sent; });
  }
};

// Bytes wait in the socket and no completion came for them: the recv is ended and armed again,
// every byte arrives once and in order, and the new recv keeps receiving.
TEST(RecvQuiet, AQuietRecvWithBytesWaitingIsArmedAgain) {
  QuietRun run;
  ASSERT_TRUE(run.h.engine.start(run.socket));
  run.send(kPiece);
  ASSERT_TRUE(run.all_received());
  ASSERT_TRUE(run.h.engine.has_quiet());  // that completion drained the socket
  const std::uint64_t submitted = run.socket.recvs_submitted();

  run.send(2 * kPiece);  // its wakeup is task work the ring has not run: the recv sleeps on it
  run.h.engine.check_quiet(Clock::now() + kLimits.quiet_check_after);
  EXPECT_EQ(run.h.counters.drain_rearms.value(), 1u);
  EXPECT_FALSE(run.h.engine.has_quiet());

  // The cancel ends the recv before its wakeup runs: the bytes come with the next recv.
  ASSERT_TRUE(run.all_received());
  EXPECT_GT(run.socket.recvs_submitted(), submitted);
  EXPECT_EQ(run.socket.state(), State::armed);
  EXPECT_EQ(run.canceled_events, 0u);  // the socket stays open: only its recv was renewed
  run.send(3 * kPiece);
  ASSERT_TRUE(run.all_received());
  EXPECT_EQ(run.verifier.mismatches, 0u);
  EXPECT_EQ(run.h.counters.drain_rearms.value(), 1u);
  EXPECT_LE(run.h.max_outstanding_gap, 1u);

  run.h.engine.close(run.socket);
  ASSERT_TRUE(run.h.run_until([&] { return run.socket.state() == State::closed; }));
  EXPECT_FALSE(run.h.engine.has_quiet());
  EXPECT_EQ(run.h.buffers.free_buffers(), 64u);
}

// The usual case: nothing waits, so the recv is looked at once and left alone.
TEST(RecvQuiet, AQuietRecvWithNothingWaitingIsLeftArmed) {
  QuietRun run;
  ASSERT_TRUE(run.h.engine.start(run.socket));
  run.send(kPiece);
  ASSERT_TRUE(run.all_received());
  const std::uint64_t submitted = run.socket.recvs_submitted();
  run.h.engine.check_quiet(Clock::now() + kLimits.quiet_check_after);
  EXPECT_EQ(run.h.counters.drain_rearms.value(), 0u);
  EXPECT_FALSE(run.h.engine.has_quiet());
  EXPECT_EQ(run.socket.state(), State::armed);
  EXPECT_EQ(run.socket.recvs_submitted(), submitted);
  run.send(kPiece);
  ASSERT_TRUE(run.all_received());
  run.h.engine.close(run.socket);
  ASSERT_TRUE(run.h.run_until([&] { return run.socket.state() == State::closed; }));
}

// Before quiet_check_after has passed the recv is not looked at (a busy connection never is);
// a completion takes it off the list, and closing does too.
TEST(RecvQuiet, ARecvIsLookedAtOnlyAfterItWasQuietLongEnough) {
  QuietRun run;
  ASSERT_TRUE(run.h.engine.start(run.socket));
  run.send(kPiece);
  ASSERT_TRUE(run.all_received());
  run.send(kPiece);
  run.h.engine.check_quiet(Clock::now() - std::chrono::hours(1));  // long before it was quiet
  EXPECT_TRUE(run.h.engine.has_quiet());
  EXPECT_EQ(run.h.counters.drain_rearms.value(), 0u);
  ASSERT_TRUE(run.all_received());        // the wakeup was not lost here: its completion comes
  EXPECT_TRUE(run.h.engine.has_quiet());  // listed again by that completion, since just now
  run.h.engine.close(run.socket);
  EXPECT_FALSE(run.h.engine.has_quiet());
  ASSERT_TRUE(run.h.run_until([&] { return run.socket.state() == State::closed; }));
  EXPECT_EQ(run.h.counters.drain_rearms.value(), 0u);
}

// A completion smaller than quiet_min_bytes (a request of one segment) is never listed: no clock
// read and no poll for it.
TEST(RecvQuiet, ASmallCompletionIsNotListed) {
  QuietRun run;
  ASSERT_TRUE(run.h.engine.start(run.socket));
  run.send(kLimits.quiet_min_bytes - 1);
  ASSERT_TRUE(run.all_received());
  EXPECT_FALSE(run.h.engine.has_quiet());
  run.h.engine.close(run.socket);
  ASSERT_TRUE(run.h.run_until([&] { return run.socket.state() == State::closed; }));
}

// FERRY_URING_NO_DRAIN_CHECK=1 (check_drained off): no recv is ever listed.
TEST(RecvQuiet, WithTheCheckOffNothingIsListed) {
  RecvLimits off = kLimits;
  off.check_drained = false;
  QuietRun run(off);
  ASSERT_TRUE(run.h.engine.start(run.socket));
  run.send(kPiece);
  ASSERT_TRUE(run.all_received());
  EXPECT_FALSE(run.h.engine.has_quiet());
  run.h.engine.close(run.socket);
  ASSERT_TRUE(run.h.run_until([&] { return run.socket.state() == State::closed; }));
}

}  // namespace
}  // namespace ferry::uring
