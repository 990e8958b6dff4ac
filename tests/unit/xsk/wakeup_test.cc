// need_wakeup helpers and the idle policy: syscalls only when the ring asks (or always without
// XDP_USE_NEED_WAKEUP), sleep only after a run of idle turns.
#include "lib/xsk/wakeup.hh"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/xsk/user_ring.hh"

namespace ferry::xsk {
namespace {

TEST(KickTx, SkipsTheSyscallUnlessTheRingAsks) {
  UserRing<xdp_desc> ring(8);
  TxRing tx(ring.producer());
  // fd -1: a syscall, if made, fails with EBADF, so the result shows whether one was made.
  EXPECT_EQ(kick_tx(-1, tx, true), Wakeup::not_needed);
  ring.set_need_wakeup(true);
  EXPECT_EQ(kick_tx(-1, tx, true), Wakeup::failed);
  EXPECT_EQ(errno, EBADF);
}

TEST(KickTx, AlwaysKicksWhenBoundWithoutNeedWakeup) {
  UserRing<xdp_desc> ring(8);
  TxRing tx(ring.producer());
  EXPECT_EQ(kick_tx(-1, tx, false), Wakeup::failed);
}

TEST(WakeFill, PollsOnlyWhenTheFillRingAsks) {
  UserRing<std::uint64_t> ring(8);
  FillRing fill(ring.producer());
  int fd = eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(wake_fill(fd, fill), Wakeup::not_needed);
  ring.set_need_wakeup(true);
  EXPECT_EQ(wake_fill(fd, fill), Wakeup::sent);
  close(fd);
}

TEST(IdleSpin, SleepsOnlyAfterTheSpinLimitOfIdleTurnsInARow) {
  IdleSpin idle(3);
  EXPECT_FALSE(idle.should_sleep(false));
  EXPECT_FALSE(idle.should_sleep(false));
  EXPECT_FALSE(idle.should_sleep(true));  // work resets the count
  EXPECT_FALSE(idle.should_sleep(false));
  EXPECT_FALSE(idle.should_sleep(false));
  EXPECT_TRUE(idle.should_sleep(false));
  EXPECT_TRUE(idle.should_sleep(false));
}

TEST(WaitForRx, ReturnsWhenAnFdIsReadyAndTimesOutOtherwise) {
  int fd = eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  pollfd fds[] = {{fd, POLLIN, 0}};
  EXPECT_EQ(wait_for_rx(fds, 0), 0);
  std::uint64_t one = 1;
  ASSERT_EQ(write(fd, &one, sizeof(one)), 8);
  EXPECT_EQ(wait_for_rx(fds, 1000), 1);
  close(fd);
}

}  // namespace
}  // namespace ferry::xsk
