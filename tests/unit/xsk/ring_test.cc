// Batch ring access over the user-space ring: wrap-around at every batch size, slice splits,
// 2^32 index wrap, capacity limits, need_wakeup.
#include "lib/xsk/ring.hh"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/user_ring.hh"

namespace ferry::xsk {
namespace {

xdp_desc desc_for(std::uint64_t n) {
  return xdp_desc{n * 4096 + 256, static_cast<std::uint32_t>(n % 1500),
                  static_cast<std::uint32_t>(n & 1)};
}

bool same(const xdp_desc& a, const xdp_desc& b) {
  return a.addr == b.addr && a.len == b.len && a.options == b.options;
}

template <typename Entry>
Entry make_entry(std::uint64_t n) {
  if constexpr (std::is_same_v<Entry, xdp_desc>) {
    return desc_for(n);
  } else {
    return n * 2048;
  }
}

template <typename Entry>
bool equal(const Entry& a, const Entry& b) {
  if constexpr (std::is_same_v<Entry, xdp_desc>) {
    return same(a, b);
  } else {
    return a == b;
  }
}

// Every batch size 1..size, many laps, starting one slot past the array start so that batches
// land on every wrap position; content is checked entry by entry after the round trip.
template <typename Entry>
void every_batch_size_round_trips(std::uint32_t size, std::uint32_t initial_index) {
  for (std::uint32_t batch = 1; batch <= size; ++batch) {
    UserRing<Entry> ring(size, initial_index);
    ProducerRing<Entry> prod(ring.producer());
    ConsumerRing<Entry> cons(ring.consumer());
    std::vector<Entry> in(batch), out(batch);
    Entry one = make_entry<Entry>(0);
    ASSERT_EQ(prod.push({&one, 1}), 1u);
    ASSERT_EQ(cons.pop({&one, 1}), 1u);
    std::uint64_t next = 1;
    std::uint64_t expect = 1;
    std::uint32_t laps = 4 * size / batch + 3;
    for (std::uint32_t lap = 0; lap < laps; ++lap) {
      for (auto& e : in) e = make_entry<Entry>(next++);
      ASSERT_EQ(prod.push(in), batch) << "batch " << batch << " lap " << lap;
      std::fill(out.begin(), out.end(), Entry{});
      ASSERT_EQ(cons.pop(out), batch) << "batch " << batch << " lap " << lap;
      for (std::uint32_t i = 0; i < batch; ++i) {
        ASSERT_TRUE(equal(out[i], make_entry<Entry>(expect++)))
            << "batch " << batch << " lap " << lap << " entry " << i;
      }
    }
    EXPECT_EQ(cons.pop(out), 0u);
  }
}

TEST(UserRing, EveryBatchSizeRoundTripsAddressesOverManyLaps) {
  every_batch_size_round_trips<std::uint64_t>(64, 0);
}

TEST(UserRing, EveryBatchSizeRoundTripsDescriptorsOverManyLaps) {
  every_batch_size_round_trips<xdp_desc>(64, 0);
}

TEST(UserRing, FreeRunningIndicesCrossTheTwoToThe32Wrap) {
  every_batch_size_round_trips<std::uint64_t>(32, 0xffffffffu - 100);
  every_batch_size_round_trips<xdp_desc>(32, 0xffffffffu - 7);
}

TEST(UserRing, RejectsSizesThatAreNotPowersOfTwo) {
  EXPECT_THROW(UserRing<std::uint64_t>(48), std::invalid_argument);
  EXPECT_THROW(UserRing<std::uint64_t>(0), std::invalid_argument);
}

TEST(FillRing, BatchCopyWrapsOnce) {
  UserRing<std::uint64_t> ring(8);
  FillRing fill(ring.producer());
  ConsumerRing<std::uint64_t> kernel(ring.consumer());
  std::vector<std::uint64_t> six(6), out(8);
  ASSERT_EQ(fill.push(six), 6u);
  ASSERT_EQ(kernel.pop(out), 6u);
  RingSlices<std::uint64_t> slots = fill.reserve(5);
  ASSERT_EQ(slots.size(), 5u);
  std::uint64_t* base = static_cast<std::uint64_t*>(ring.producer()->ring);
  EXPECT_EQ(slots.head.data(), base + 6);
  EXPECT_EQ(slots.head.size(), 2u);
  EXPECT_EQ(slots.tail.data(), base);
  EXPECT_EQ(slots.tail.size(), 3u);
  std::vector<std::uint64_t> five = {10, 11, 12, 13, 14};
  copy_into(slots, five.data());
  fill.submit(5);
  EXPECT_EQ(base[6], 10u);
  EXPECT_EQ(base[7], 11u);
  EXPECT_EQ(base[0], 12u);
  EXPECT_EQ(base[2], 14u);
  RingSlices<const std::uint64_t> got = kernel.peek(8);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got.head.size(), 2u);
  EXPECT_EQ(got.tail.size(), 3u);
  out.assign(8, 0);
  copy_out(got, out.data());
  kernel.release(5);
  EXPECT_EQ(std::vector<std::uint64_t>(out.begin(), out.begin() + 5), five);
}

TEST(FillRing, BatchThatEndsAtTheArrayEndHasNoTail) {
  UserRing<std::uint64_t> ring(8);
  FillRing fill(ring.producer());
  RingSlices<std::uint64_t> slots = fill.reserve(8);
  EXPECT_EQ(slots.head.size(), 8u);
  EXPECT_TRUE(slots.tail.empty());
}

TEST(RingSlices, CopyBetweenHandlesEverySplitCombination) {
  constexpr std::uint32_t kSize = 8;
  for (std::uint32_t src_start = 0; src_start < kSize; ++src_start) {
    for (std::uint32_t dst_start = 0; dst_start < kSize; ++dst_start) {
      for (std::uint32_t n = 0; n <= kSize; ++n) {
        std::vector<std::uint64_t> src(kSize), dst(kSize, 0);
        std::iota(src.begin(), src.end(), 100);
        auto s = ring_slices<const std::uint64_t>(src.data(), kSize - 1, src_start, n);
        auto d = ring_slices<std::uint64_t>(dst.data(), kSize - 1, dst_start, n);
        copy_between(s, d);
        for (std::uint32_t i = 0; i < n; ++i) {
          ASSERT_EQ(dst[(dst_start + i) % kSize], src[(src_start + i) % kSize])
              << "src " << src_start << " dst " << dst_start << " n " << n << " i " << i;
        }
        std::uint32_t untouched = 0;
        for (std::uint64_t v : dst) untouched += v == 0;
        ASSERT_EQ(untouched, kSize - n);
      }
    }
  }
}

TEST(RingSlices, FirstAndDropSplitABatchAtAnyPoint) {
  std::vector<std::uint64_t> a(8);
  std::iota(a.begin(), a.end(), 0);
  auto whole = ring_slices<std::uint64_t>(a.data(), 7, 5, 7);  // 5,6,7 | 0,1,2,3
  for (std::uint32_t n = 0; n <= 7; ++n) {
    auto f = whole.first(n);
    auto d = whole.drop(n);
    ASSERT_EQ(f.size(), n);
    ASSERT_EQ(d.size(), 7 - n);
    for (std::uint32_t i = 0; i < n; ++i) EXPECT_EQ(f[i], (5 + i) % 8);
    for (std::uint32_t i = 0; i < 7 - n; ++i) EXPECT_EQ(d[i], (5 + n + i) % 8);
  }
}

TEST(TxRing, PushStopsAtCapacityAndResumesAfterRelease) {
  UserRing<xdp_desc> ring(16);
  TxRing tx(ring.producer());
  ConsumerRing<xdp_desc> kernel(ring.consumer());
  std::vector<xdp_desc> many(40);
  for (std::uint32_t i = 0; i < many.size(); ++i) many[i] = desc_for(i);
  EXPECT_EQ(tx.push(many), 16u);
  EXPECT_EQ(tx.push(many), 0u);
  std::vector<xdp_desc> out(5);
  ASSERT_EQ(kernel.pop(out), 5u);
  EXPECT_TRUE(same(out[4], desc_for(4)));
  EXPECT_EQ(tx.push(std::span(many).subspan(16)), 5u);
  out.resize(16);
  ASSERT_EQ(kernel.pop(out), 16u);
  for (std::uint32_t i = 0; i < 16; ++i) EXPECT_TRUE(same(out[i], desc_for(5 + i))) << i;
}

TEST(RxRing, ConsumerSeesOnlySubmittedEntries) {
  UserRing<xdp_desc> ring(16);
  ProducerRing<xdp_desc> kernel(ring.producer());
  RxRing rx(ring.consumer());
  RingSlices<xdp_desc> slots = kernel.reserve(4);
  ASSERT_EQ(slots.size(), 4u);
  EXPECT_TRUE(rx.peek(16).empty());
  kernel.submit(3);
  kernel.cancel(1);
  RingSlices<const xdp_desc> got = rx.peek(16);
  EXPECT_EQ(got.size(), 3u);
  rx.cancel(1);
  rx.release(2);
  EXPECT_EQ(rx.peek(16).size(), 1u);
}

TEST(RxRing, InterleavedUnevenBatchesKeepFifoOrder) {
  UserRing<xdp_desc> ring(64, 0xffffff00u);
  ProducerRing<xdp_desc> kernel(ring.producer());
  RxRing rx(ring.consumer());
  std::mt19937 rng(7);
  std::uint64_t produced = 0, consumed = 0;
  std::vector<xdp_desc> buf(64);
  for (int step = 0; step < 20000; ++step) {
    std::uint32_t n = rng() % 64 + 1;
    if (rng() & 1) {
      for (std::uint32_t i = 0; i < n; ++i) buf[i] = desc_for(produced + i);
      produced += kernel.push(std::span(buf).first(n));
    } else {
      std::uint32_t got = rx.pop(std::span(buf).first(n));
      for (std::uint32_t i = 0; i < got; ++i) ASSERT_TRUE(same(buf[i], desc_for(consumed + i)));
      consumed += got;
    }
    ASSERT_LE(produced - consumed, 64u);
  }
  EXPECT_GT(consumed, 100000u);
}

TEST(TxRing, NeedsWakeupFollowsTheFlagsWord) {
  UserRing<xdp_desc> ring(8);
  TxRing tx(ring.producer());
  EXPECT_FALSE(tx.needs_wakeup());
  ring.set_need_wakeup(true);
  EXPECT_TRUE(tx.needs_wakeup());
  ring.set_need_wakeup(false);
  EXPECT_FALSE(tx.needs_wakeup());
}

TEST(CompletionRing, IndexWordsReportOccupancy) {
  UserRing<std::uint64_t> ring(8, 0xfffffffeu);
  ProducerRing<std::uint64_t> kernel(ring.producer());
  CompletionRing completion(ring.consumer());
  std::vector<std::uint64_t> three = {1, 2, 3};
  kernel.push(three);
  EXPECT_EQ(completion.producer_word() - completion.consumer_word(), 3u);
  std::uint64_t one = 0;
  completion.pop({&one, 1});
  EXPECT_EQ(one, 1u);
  EXPECT_EQ(completion.producer_word() - completion.consumer_word(), 2u);
}

}  // namespace
}  // namespace ferry::xsk
