// BufferRing bookkeeping, driven with synthetic completions (no recv is submitted, so the kernel
// never touches the ring): spans per completion, the wrap, out-of-order recycling, incremental
// offsets and IORING_CQE_F_BUF_MORE, and when a buffer goes back into the ring.
#include "lib/uring/buffer_ring.hh"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "lib/uring/probe.hh"

namespace ferry::uring {
namespace {

constexpr std::uint32_t kBytes = 4096;

iovec buffer_span(const BufferRing& ring, std::uint16_t bid, std::uint32_t offset = 0,
                  std::uint32_t len = kBytes) {
  return iovec{const_cast<std::byte*>(ring.area()) + bid * kBytes + offset, len};
}

std::vector<iovec> copy(const SpanList& list) {
  return {list.view().begin(), list.view().end()};
}

TEST(BufferRing, ProvidesEveryBufferInAddressOrder) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, false});
  EXPECT_EQ(ring.free_buffers(), 8u);
  EXPECT_EQ(ring.held_buffers(), 0u);
  EXPECT_EQ(ring.free_gauge().value(), 8);
  SpanList out(8);
  auto c = ring.consume(0, 8 * kBytes, true, false, out);
  EXPECT_EQ(c.status, BufferRing::ConsumeStatus::ok);
  EXPECT_EQ(c.buffers, 8u);
  ASSERT_EQ(out.size(), 1u);  // eight buffers, one contiguous span
  EXPECT_EQ(out.view()[0].iov_base, ring.area());
  EXPECT_EQ(out.view()[0].iov_len, 8 * kBytes);
  EXPECT_EQ(ring.free_buffers(), 0u);
}

TEST(BufferRing, NonIncrementalBufferIsConsumedWholeAndReturnsOnlyAfterRelease) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, false});
  SpanList out(8);
  auto c = ring.consume(0, 100, false, false, out);
  EXPECT_EQ(c.status, BufferRing::ConsumeStatus::ok);
  EXPECT_EQ(c.buffers, 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.view()[0].iov_len, 100u);
  EXPECT_EQ(ring.free_buffers(), 7u);  // the kernel is done with all of it
  EXPECT_EQ(ring.held_buffers(), 1u);
  EXPECT_EQ(ring.release(out.view()[0]), 1u);
  EXPECT_EQ(ring.free_buffers(), 8u);
  EXPECT_EQ(ring.release(out.view()[0]), 0u);  // a second release is ignored
  EXPECT_EQ(ring.free_buffers(), 8u);
}

TEST(BufferRing, BundleAcrossTheRingWrapIsTwoSpans) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, false});
  SpanList out(8);
  ring.consume(0, 6 * kBytes, true, false, out);
  ring.release(out.view());  // bids 0..5 go back at slots 0..5, after 6 and 7
  out.clear();
  auto c = ring.consume(6, 3 * kBytes + 10, true, false, out);
  EXPECT_EQ(c.status, BufferRing::ConsumeStatus::ok);
  EXPECT_EQ(c.buffers, 4u);  // slots 6, 7, 0, 1 hold bids 6, 7, 0, 1
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.view()[0].iov_base, buffer_span(ring, 6).iov_base);
  EXPECT_EQ(out.view()[0].iov_len, 2 * kBytes);
  EXPECT_EQ(out.view()[1].iov_base, ring.area());
  EXPECT_EQ(out.view()[1].iov_len, kBytes + 10);
}

TEST(BufferRing, OutOfOrderRecycleMakesConsecutiveSlotsNonAdjacent) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, false});
  SpanList out(8);
  ring.consume(0, 8 * kBytes, true, false, out);
  // The consumer finishes the buffers last to first: they go back in that order.
  for (int bid = 7; bid >= 0; --bid) {
    EXPECT_EQ(ring.release(buffer_span(ring, static_cast<std::uint16_t>(bid))), 1u);
  }
  out.clear();
  auto c = ring.consume(7, 8 * kBytes, true, false, out);
  EXPECT_EQ(c.status, BufferRing::ConsumeStatus::ok);
  ASSERT_EQ(out.size(), 8u);  // no two consecutive slots are neighbours in memory
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(out.view()[i].iov_base,
              buffer_span(ring, static_cast<std::uint16_t>(7 - i)).iov_base);
    EXPECT_EQ(out.view()[i].iov_len, kBytes);
  }
}

TEST(BufferRing, IncrementalRingTracksTheOffsetAndBufMore) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, true});
  ASSERT_TRUE(ring.incremental());
  SpanList out(8);
  auto c = ring.consume(0, 1000, false, true, out);
  EXPECT_EQ(c.status, BufferRing::ConsumeStatus::ok);
  std::vector<iovec> first = copy(out);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].iov_base, ring.area());
  EXPECT_EQ(ring.free_buffers(), 8u);  // the kernel keeps filling buffer 0

  out.clear();
  c = ring.consume(0, kBytes - 1000, false, false, out);
  EXPECT_EQ(c.status, BufferRing::ConsumeStatus::ok);
  std::vector<iovec> second = copy(out);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].iov_base, ring.area() + 1000);  // right after the first completion's bytes
  EXPECT_EQ(second[0].iov_len, kBytes - 1000);
  EXPECT_EQ(ring.free_buffers(), 7u);  // full: the kernel moved on

  EXPECT_EQ(ring.release(first[0]), 0u);  // the second completion still holds it
  EXPECT_EQ(ring.release(second[0]), 1u);
  EXPECT_EQ(ring.free_buffers(), 8u);
}

TEST(BufferRing, IncrementalBundleContinuesMidBufferAndStaysOneSpan) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, true});
  ASSERT_TRUE(ring.incremental());
  SpanList out(8);
  ring.consume(0, 500, true, true, out);
  out.clear();
  auto c = ring.consume(0, 2 * kBytes, true, true, out);
  EXPECT_EQ(c.status, BufferRing::ConsumeStatus::ok);
  EXPECT_EQ(c.buffers, 3u);  // rest of 0, all of 1, the first 500 bytes of 2
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.view()[0].iov_base, ring.area() + 500);
  EXPECT_EQ(out.view()[0].iov_len, 2 * kBytes);
  EXPECT_EQ(ring.free_buffers(), 6u);
}

TEST(BufferRing, BufMoreThatContradictsTheOffsetIsReported) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, true});
  ASSERT_TRUE(ring.incremental());
  SpanList out(8);
  EXPECT_EQ(ring.consume(0, 100, false, false, out).status,
            BufferRing::ConsumeStatus::buf_more_mismatch);
}

TEST(BufferRing, UnknownOrOverrunCompletionsAreReportedNotTrusted) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, false});
  SpanList out(8);
  EXPECT_EQ(ring.consume(8, 10, false, false, out).status,
            BufferRing::ConsumeStatus::unknown_buffer);
  ring.consume(0, 10, false, false, out);  // buffer 0 is now out of the ring
  EXPECT_EQ(ring.consume(0, 10, false, false, out).status,
            BufferRing::ConsumeStatus::unknown_buffer);
  out.clear();
  EXPECT_EQ(ring.consume(1, kBytes + 1, false, false, out).status,
            BufferRing::ConsumeStatus::overrun);
}

TEST(BufferRing, EmptySingleRecvStillConsumesItsBuffer) {
  Uring uring;
  BufferRing ring(uring, BufferRingConfig{8, kBytes, 1, false});
  SpanList out(8);
  auto c = ring.consume(0, 0, false, false, out);
  EXPECT_EQ(c.buffers, 1u);
  EXPECT_EQ(c.given_back, 1u);  // nothing to hand out, so straight back
  EXPECT_EQ(out.size(), 0u);
  EXPECT_EQ(ring.free_buffers(), 8u);
  c = ring.consume(1, 0, true, false, out);  // an empty bundle commits nothing
  EXPECT_EQ(c.buffers, 0u);
  EXPECT_EQ(ring.free_buffers(), 8u);
}

TEST(BufferRing, RejectsGeometriesTheKernelCannotTake) {
  Uring uring;
  EXPECT_THROW(BufferRing(uring, BufferRingConfig{3, kBytes, 1, false}), std::invalid_argument);
  EXPECT_THROW(BufferRing(uring, BufferRingConfig{65536, kBytes, 1, false}), std::invalid_argument);
  EXPECT_THROW(BufferRing(uring, BufferRingConfig{8, 0, 1, false}), std::invalid_argument);
}

TEST(BufferRing, TwoGroupsOnOneRingNeedDistinctIds) {
  Uring uring;
  BufferRing a(uring, BufferRingConfig{8, kBytes, 1, false});
  EXPECT_THROW(BufferRing(uring, BufferRingConfig{8, kBytes, 1, false}), std::system_error);
  BufferRing b(uring, BufferRingConfig{8, kBytes, 2, false});
  EXPECT_EQ(b.group_id(), 2);
}

}  // namespace
}  // namespace ferry::uring
