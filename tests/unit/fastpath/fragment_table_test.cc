// FragmentTable: the first fragment decides for its datagram and later ones follow or wait for it
// in arrival order; duplicates, overlaps, second ends and too many pieces are told apart; a full
// bucket gives up its least recently seen datagram (a complete one first); held frames and bytes
// are bounded, and held frames and idle datagrams are swept after their timeouts.
#include "lib/fastpath/fragment_table.hh"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "tests/unit/packet/frame_builder.hh"

namespace ferry::fastpath {
namespace {

using packet::test::addr;

FragmentKey key(std::uint32_t id, const std::string& src = "10.1.0.5") {
  FragmentKey k;
  k.src = addr(src);
  k.dst = addr("10.0.0.10");
  k.id = id;
  return k;
}

packet::Fragment piece(std::uint32_t offset, std::uint32_t data, bool more, std::uint32_t id = 0) {
  packet::Fragment f;
  f.id = id;
  f.offset_bytes = offset;
  f.data_bytes = data;
  f.more = more;
  return f;
}

FragmentDecision to_backend(const char* address) {
  FragmentDecision d;
  d.rewrite = FragmentRewrite::destination;
  d.address = addr(address);
  return d;
}

const FragmentDecision kToBackend = to_backend("10.2.0.3");
const FragmentDecision kToOtherBackend = to_backend("10.2.0.4");

// The table, the slot of the last record() and the frames it gave up.
class FragmentTableTest : public ::testing::Test {
 protected:
  FragmentSeen record(const FragmentKey& k, const packet::Fragment& f, std::uint64_t now_ms = 0) {
    return table_.record(k, f, now_ms, slot_, [this](const FragmentTable::HeldFrame& h) {
      given_up_.push_back(h.addr);
    });
  }
  std::vector<std::uint64_t> take_held(std::uint32_t slot) {
    std::vector<FragmentTable::HeldFrame> out(FragmentTable::Limits{}.held_frames);
    out.resize(table_.take_held(slot, out));
    std::vector<std::uint64_t> addrs;
    for (const auto& h : out) addrs.push_back(h.addr);
    return addrs;
  }
  std::uint32_t sweep(std::uint64_t now_ms) {
    return table_.sweep(now_ms,
                        [this](const FragmentTable::HeldFrame& h) { given_up_.push_back(h.addr); });
  }
  void use(const FragmentTable::Limits& limits) { table_ = FragmentTable(limits); }

  FragmentTable table_;
  std::uint32_t slot_ = 0;
  std::vector<std::uint64_t> given_up_;
};

TEST_F(FragmentTableTest, LaterFragmentsFollowTheDecisionOfTheFirst) {
  EXPECT_EQ(record(key(1), piece(0, 1480, true)), FragmentSeen::undecided);
  std::uint32_t first = slot_;
  table_.decide(first, kToBackend);
  EXPECT_EQ(record(key(1), piece(1480, 1480, true)), FragmentSeen::decided);
  EXPECT_EQ(slot_, first);
  EXPECT_EQ(record(key(1), piece(2960, 40, false)), FragmentSeen::decided);
  EXPECT_EQ(slot_, first);
  EXPECT_EQ(table_.decision(first).rewrite, FragmentRewrite::destination);
  EXPECT_EQ(table_.decision(first).address, addr("10.2.0.3"));
  EXPECT_FALSE(table_.refused(first));
  EXPECT_EQ(table_.datagrams_in_use(), 1u);
  EXPECT_EQ(table_.held_count(), 0u);
}

TEST_F(FragmentTableTest, LaterFragmentsBeforeTheFirstAreHeldAndReleasedInArrivalOrder) {
  EXPECT_EQ(record(key(2), piece(2960, 40, false)), FragmentSeen::undecided);
  std::uint32_t slot = slot_;
  ASSERT_TRUE(table_.hold(slot, 0x1000, 74, 5));
  EXPECT_EQ(record(key(2), piece(1480, 1480, true)), FragmentSeen::undecided);
  EXPECT_EQ(slot_, slot);
  ASSERT_TRUE(table_.hold(slot, 0x2000, 1514, 6));
  EXPECT_EQ(table_.held_count(), 2u);
  EXPECT_EQ(table_.held_bytes(), 74u + 1514u);

  EXPECT_EQ(record(key(2), piece(0, 1480, true)), FragmentSeen::undecided) << "the first decides";
  EXPECT_EQ(slot_, slot);
  table_.decide(slot, kToBackend);
  EXPECT_EQ(take_held(slot), (std::vector<std::uint64_t>{0x1000, 0x2000}));
  EXPECT_EQ(table_.held_count(), 0u);
  EXPECT_EQ(table_.held_bytes(), 0u);
  EXPECT_TRUE(take_held(slot).empty());
  EXPECT_TRUE(given_up_.empty());
}

TEST_F(FragmentTableTest, AFiveFragmentDatagramInReverseOrder) {
  // 5 fragments of 1000 data bytes, the last one first.
  std::uint32_t slot = 0;
  for (std::uint32_t i = 4; i >= 1; --i) {
    EXPECT_EQ(record(key(3), piece(i * 1000, 1000, i != 4)), FragmentSeen::undecided) << i;
    if (i != 4) {
      EXPECT_EQ(slot_, slot);
    }
    slot = slot_;
    ASSERT_TRUE(table_.hold(slot, 0x1000 * i, 1034, 10 + i));
  }
  EXPECT_EQ(table_.held_count(), 4u);
  EXPECT_EQ(record(key(3), piece(0, 1000, true)), FragmentSeen::undecided);
  EXPECT_EQ(slot_, slot);
  table_.decide(slot, kToBackend);
  EXPECT_EQ(take_held(slot), (std::vector<std::uint64_t>{0x4000, 0x3000, 0x2000, 0x1000}))
      << "in the order they came, not by offset";
  // Every byte has been seen: the datagram is over, and a fragment with its key starts a new one
  // (the sender reused the identification), whose own repeats are duplicates.
  EXPECT_EQ(record(key(3), piece(4000, 1000, false)), FragmentSeen::undecided);
  EXPECT_EQ(slot_, slot) << "in the same place";
  EXPECT_EQ(table_.held_count(), 0u);
  EXPECT_EQ(record(key(3), piece(4000, 1000, false)), FragmentSeen::duplicate);
  EXPECT_EQ(record(key(3), piece(0, 1000, true)), FragmentSeen::undecided)
      << "the new datagram's first fragment decides it anew";
  EXPECT_FALSE(table_.refused(slot));
}

TEST_F(FragmentTableTest, InterleavedDatagramsKeepTheirOwnDecisionsAndHeldFrames) {
  // Same addresses, ids 7 and 8; and id 7 from another source, a datagram of its own.
  EXPECT_EQ(record(key(7), piece(1480, 1480, true)), FragmentSeen::undecided);
  std::uint32_t seven = slot_;
  ASSERT_TRUE(table_.hold(seven, 0x7000, 100, 0));
  EXPECT_EQ(record(key(8), piece(1480, 1480, true)), FragmentSeen::undecided);
  std::uint32_t eight = slot_;
  EXPECT_NE(eight, seven);
  ASSERT_TRUE(table_.hold(eight, 0x8000, 100, 0));
  EXPECT_EQ(record(key(7, "10.1.0.6"), piece(1480, 1480, true)), FragmentSeen::undecided);
  std::uint32_t other = slot_;
  EXPECT_NE(other, seven);
  EXPECT_NE(other, eight);
  ASSERT_TRUE(table_.hold(other, 0x9000, 100, 0));
  EXPECT_EQ(record(key(8), piece(2960, 8, false)), FragmentSeen::undecided);
  ASSERT_TRUE(table_.hold(eight, 0x8001, 100, 0));

  EXPECT_EQ(record(key(8), piece(0, 1480, true)), FragmentSeen::undecided);
  table_.decide(eight, kToOtherBackend);
  EXPECT_EQ(take_held(eight), (std::vector<std::uint64_t>{0x8000, 0x8001}));
  EXPECT_EQ(table_.held_count(), 2u) << "the other datagrams' frames wait on";
  EXPECT_EQ(record(key(7), piece(2960, 8, false)), FragmentSeen::undecided)
      << "id 7 is not decided by id 8's first fragment";
  EXPECT_EQ(record(key(7), piece(0, 1480, true)), FragmentSeen::undecided);
  table_.decide(seven, kToBackend);
  EXPECT_EQ(take_held(seven), (std::vector<std::uint64_t>{0x7000}));
  EXPECT_EQ(table_.decision(seven).address, addr("10.2.0.3"));
  EXPECT_EQ(table_.decision(eight).address, addr("10.2.0.4"));
  EXPECT_EQ(table_.held_count(), 1u);
  EXPECT_EQ(table_.datagrams_in_use(), 3u);
}

TEST_F(FragmentTableTest, ExactDuplicatesAreDuplicatesAndChangeNothing) {
  EXPECT_EQ(record(key(4), piece(1480, 1480, true)), FragmentSeen::undecided);
  EXPECT_EQ(record(key(4), piece(1480, 1480, true)), FragmentSeen::duplicate)
      << "a duplicate of a later fragment, before the first";
  EXPECT_EQ(record(key(4), piece(0, 1480, true)), FragmentSeen::undecided);
  table_.decide(slot_, kToBackend);
  EXPECT_EQ(record(key(4), piece(0, 1480, true)), FragmentSeen::duplicate);
  EXPECT_EQ(record(key(4), piece(1480, 1480, true)), FragmentSeen::duplicate);
  EXPECT_EQ(record(key(4), piece(2960, 48, true)), FragmentSeen::decided);
  EXPECT_EQ(record(key(4), piece(2960, 48, true)), FragmentSeen::duplicate);
  EXPECT_EQ(record(key(4), piece(2960, 16, true)), FragmentSeen::duplicate)
      << "bytes within what was seen";
  EXPECT_FALSE(table_.refused(slot_));
  EXPECT_EQ(table_.decision(slot_).address, addr("10.2.0.3"));
  // The last fragment completes it: the datagram is over, its key's next fragment starts anew.
  EXPECT_EQ(record(key(4), piece(3008, 100, false)), FragmentSeen::decided);
  EXPECT_EQ(record(key(4), piece(3008, 100, false)), FragmentSeen::undecided)
      << "the sender reused the identification";
}

TEST_F(FragmentTableTest, APartialOverlapRefusesTheWholeDatagram) {
  EXPECT_EQ(record(key(5), piece(0, 1480, true)), FragmentSeen::undecided);
  std::uint32_t slot = slot_;
  table_.decide(slot, kToBackend);
  EXPECT_EQ(record(key(5), piece(1400, 1480, true)), FragmentSeen::overlap);
  EXPECT_TRUE(table_.refused(slot));
  EXPECT_EQ(record(key(5), piece(2880, 200, false)), FragmentSeen::refused)
      << "bytes nobody saw, of a refused datagram";
  EXPECT_EQ(record(key(5), piece(0, 1480, true)), FragmentSeen::refused);
  EXPECT_EQ(slot_, slot);

  // A fragment covering one seen (and more on both sides) overlaps too.
  EXPECT_EQ(record(key(6), piece(1480, 8, true)), FragmentSeen::undecided);
  EXPECT_EQ(record(key(6), piece(1472, 24, true)), FragmentSeen::overlap);
  EXPECT_TRUE(table_.refused(slot_));
}

TEST_F(FragmentTableTest, ASecondLastFragmentWithAnotherEndIsAnOverlap) {
  EXPECT_EQ(record(key(9), piece(2960, 40, false)), FragmentSeen::undecided);
  EXPECT_EQ(record(key(9), piece(4440, 40, false)), FragmentSeen::overlap) << "ends later";
  EXPECT_TRUE(table_.refused(slot_));

  EXPECT_EQ(record(key(10), piece(2960, 40, false)), FragmentSeen::undecided);
  EXPECT_EQ(record(key(10), piece(1480, 16, false)), FragmentSeen::overlap) << "ends earlier";
  EXPECT_TRUE(table_.refused(slot_));

  EXPECT_EQ(record(key(11), piece(2960, 40, false)), FragmentSeen::undecided);
  EXPECT_EQ(record(key(11), piece(3000, 8, true)), FragmentSeen::overlap) << "past the end";
  EXPECT_TRUE(table_.refused(slot_));

  // A last fragment that ends before bytes already seen.
  EXPECT_EQ(record(key(12), piece(2960, 40, true)), FragmentSeen::undecided);
  EXPECT_EQ(record(key(12), piece(1480, 40, false)), FragmentSeen::overlap);
  EXPECT_TRUE(table_.refused(slot_));
}

TEST_F(FragmentTableTest, MorePiecesThanTrackedRefuseTheDatagramButAdjacentOnesMerge) {
  // 16 separate pieces of 8 bytes with 8-byte gaps are tracked; a 17th is one too many.
  for (std::uint32_t i = 0; i < FragmentTable::kMaxPieces; ++i) {
    EXPECT_EQ(record(key(13), piece(16 * i, 8, true)), FragmentSeen::undecided) << i;
  }
  EXPECT_EQ(record(key(13), piece(16 * FragmentTable::kMaxPieces, 8, false)),
            FragmentSeen::too_many);
  EXPECT_TRUE(table_.refused(slot_));
  EXPECT_EQ(record(key(13), piece(8, 8, true)), FragmentSeen::refused);

  // Pieces next to each other merge: 200 fragments of 8 bytes, 16 apart from each other first and
  // then the rest in between, are one datagram.
  constexpr std::uint32_t kCount = 200;
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < FragmentTable::kMaxPieces; ++i) order.push_back(12 * i);
  for (std::uint32_t i = 0; i < kCount; ++i) {
    if (i % 12 != 0 || i >= 12 * FragmentTable::kMaxPieces) order.push_back(i);
  }
  ASSERT_EQ(order.size(), kCount);
  for (std::uint32_t i : order) {
    ASSERT_EQ(record(key(14), piece(8 * i, 8, i != kCount - 1)), FragmentSeen::undecided) << i;
  }
  EXPECT_FALSE(table_.refused(slot_));
  EXPECT_EQ(record(key(14), piece(0, 8 * kCount, false)), FragmentSeen::undecided)
      << "every byte seen: the datagram is over, this one is new";
}

TEST_F(FragmentTableTest, AFullBucketGivesUpItsLeastRecentlySeenDatagram) {
  use({.datagrams = 4});  // one bucket of 4 ways: every datagram meets every other
  for (std::uint32_t id = 1; id <= 4; ++id) {
    ASSERT_EQ(record(key(id), piece(1480, 1480, true), 10 * id), FragmentSeen::undecided);
    ASSERT_TRUE(table_.hold(slot_, 0x1000 * id, 1514, 10 * id));
  }
  ASSERT_EQ(record(key(1), piece(2960, 8, false), 50), FragmentSeen::undecided);  // 1 is fresh
  ASSERT_TRUE(table_.hold(slot_, 0x1001, 42, 50));
  EXPECT_EQ(table_.datagrams_in_use(), 4u);

  EXPECT_EQ(record(key(5), piece(1480, 1480, true), 60), FragmentSeen::undecided);
  EXPECT_EQ(given_up_, (std::vector<std::uint64_t>{0x2000})) << "id 2 was seen last at 20";
  EXPECT_EQ(table_.datagrams_in_use(), 4u);
  EXPECT_EQ(table_.held_count(), 4u);
  EXPECT_EQ(table_.held_bytes(), 3u * 1514u + 42u);

  // Id 2 comes back as a datagram nobody has seen: it gives up the next oldest, id 3.
  EXPECT_EQ(record(key(2), piece(0, 1480, true), 70), FragmentSeen::undecided);
  EXPECT_EQ(given_up_, (std::vector<std::uint64_t>{0x2000, 0x3000}));
  // Id 1's frames are still there, the bucket's most recent.
  EXPECT_EQ(record(key(1), piece(0, 1480, true), 80), FragmentSeen::undecided);
  table_.decide(slot_, kToBackend);
  EXPECT_EQ(take_held(slot_), (std::vector<std::uint64_t>{0x1000, 0x1001}));
}

TEST_F(FragmentTableTest, ACompleteDatagramIsGivenUpBeforeOlderIncompleteOnes) {
  use({.datagrams = 4});
  for (std::uint32_t id = 1; id <= 3; ++id) {
    ASSERT_EQ(record(key(id), piece(1480, 1480, true), id), FragmentSeen::undecided);
    ASSERT_TRUE(table_.hold(slot_, 0x1000 * id, 1514, id));
  }
  // Id 4, the most recent, is complete: only its duplicates can still come.
  ASSERT_EQ(record(key(4), piece(0, 1480, true), 100), FragmentSeen::undecided);
  table_.decide(slot_, kToBackend);
  ASSERT_EQ(record(key(4), piece(1480, 100, false), 100), FragmentSeen::decided);
  EXPECT_EQ(record(key(5), piece(1480, 1480, true), 110), FragmentSeen::undecided);
  EXPECT_TRUE(given_up_.empty()) << "the complete datagram held nothing";
  EXPECT_EQ(table_.held_count(), 3u);
  EXPECT_EQ(record(key(4), piece(1480, 100, false), 120), FragmentSeen::undecided)
      << "id 4 was forgotten: its fragment starts a new datagram";
  EXPECT_EQ(given_up_, (std::vector<std::uint64_t>{0x1000})) << "then the oldest, id 1";
}

TEST_F(FragmentTableTest, HeldFramesAndBytesAreBounded) {
  use({.held_frames = 3, .held_bytes = 1 << 20});
  ASSERT_EQ(record(key(1), piece(1480, 1480, true)), FragmentSeen::undecided);
  for (std::uint64_t i = 0; i < 3; ++i) EXPECT_TRUE(table_.hold(slot_, 0x1000 * i, 100, 0));
  EXPECT_FALSE(table_.hold(slot_, 0x9000, 100, 0)) << "frames at their bound";
  EXPECT_EQ(table_.held_count(), 3u);

  use({.held_frames = 256, .held_bytes = 3000});
  ASSERT_EQ(record(key(1), piece(1480, 1480, true)), FragmentSeen::undecided);
  EXPECT_TRUE(table_.hold(slot_, 0x1000, 1514, 0));
  EXPECT_FALSE(table_.hold(slot_, 0x2000, 1514, 0)) << "3028 bytes would pass 3000";
  EXPECT_TRUE(table_.hold(slot_, 0x3000, 1486, 0)) << "3000 bytes exactly";
  EXPECT_EQ(table_.held_bytes(), 3000u);
  EXPECT_FALSE(table_.hold(slot_, 0x4000, 1, 0));
  ASSERT_EQ(record(key(1), piece(0, 1480, true)), FragmentSeen::undecided);
  table_.decide(slot_, kToBackend);
  EXPECT_EQ(take_held(slot_).size(), 2u);
  EXPECT_TRUE(table_.hold(slot_, 0x2000, 1514, 0)) << "room again once taken";
}

TEST_F(FragmentTableTest, HeldFramesAreSweptAfterTheHeldTimeoutAndTheDatagramWaitsOn) {
  use({.held_timeout_ms = 1000});
  ASSERT_EQ(record(key(1), piece(1480, 1480, true), 100), FragmentSeen::undecided);
  std::uint32_t slot = slot_;
  ASSERT_TRUE(table_.hold(slot, 0x1000, 1514, 100));
  ASSERT_EQ(record(key(1), piece(2960, 8, false), 600), FragmentSeen::undecided);
  ASSERT_TRUE(table_.hold(slot, 0x2000, 42, 600));
  EXPECT_EQ(sweep(1099), 0u);
  EXPECT_EQ(sweep(1100), 1u);
  EXPECT_EQ(given_up_, (std::vector<std::uint64_t>{0x1000}));
  EXPECT_EQ(table_.held_count(), 1u);
  EXPECT_EQ(table_.held_bytes(), 42u);
  EXPECT_EQ(sweep(1600), 1u);
  EXPECT_EQ(given_up_, (std::vector<std::uint64_t>{0x1000, 0x2000}));
  EXPECT_EQ(table_.held_count(), 0u);
  EXPECT_EQ(table_.held_bytes(), 0u);
  // The datagram itself is not idle yet: its first fragment still decides, nothing to release.
  EXPECT_EQ(table_.datagrams_in_use(), 1u);
  EXPECT_EQ(record(key(1), piece(0, 1480, true), 1700), FragmentSeen::undecided);
  EXPECT_EQ(slot_, slot);
  EXPECT_TRUE(take_held(slot).empty());
}

TEST_F(FragmentTableTest, IdleDatagramsAreForgottenWithTheirHeldFrames) {
  use({.idle_timeout_ms = 3000, .held_timeout_ms = 5000});
  ASSERT_EQ(record(key(1), piece(0, 1480, true), 0), FragmentSeen::undecided);
  table_.decide(slot_, kToBackend);
  ASSERT_EQ(record(key(2), piece(1480, 1480, true), 1000), FragmentSeen::undecided);
  ASSERT_TRUE(table_.hold(slot_, 0x2000, 1514, 1000));
  EXPECT_EQ(table_.datagrams_in_use(), 2u);

  EXPECT_EQ(sweep(2999), 0u);
  EXPECT_EQ(table_.datagrams_in_use(), 2u);
  EXPECT_EQ(sweep(3000), 0u) << "id 1 is idle and forgotten; it held nothing";
  EXPECT_EQ(table_.datagrams_in_use(), 1u);
  EXPECT_EQ(sweep(4000), 1u) << "id 2 is idle before its frame's held timeout: it goes with it";
  EXPECT_EQ(given_up_, (std::vector<std::uint64_t>{0x2000}));
  EXPECT_EQ(table_.datagrams_in_use(), 0u);
  EXPECT_EQ(table_.held_count(), 0u);
  EXPECT_EQ(record(key(1), piece(1480, 1480, true), 4000), FragmentSeen::undecided)
      << "a forgotten decision is not followed";
}

TEST_F(FragmentTableTest, ADatagramIdleWhenItsNextFragmentComesStartsAfresh) {
  use({.idle_timeout_ms = 3000, .held_timeout_ms = 5000});
  ASSERT_EQ(record(key(1), piece(1480, 1480, true), 0), FragmentSeen::undecided);
  ASSERT_TRUE(table_.hold(slot_, 0x1000, 1514, 0));
  // Not swept in between: record() finds it idle itself, and gives up what it held.
  EXPECT_EQ(record(key(1), piece(1480, 1480, true), 3000), FragmentSeen::undecided)
      << "not a duplicate of what the forgotten datagram saw";
  EXPECT_EQ(given_up_, (std::vector<std::uint64_t>{0x1000}));
  EXPECT_EQ(table_.held_count(), 0u);
  EXPECT_EQ(table_.datagrams_in_use(), 1u);
}

TEST_F(FragmentTableTest, ClearGivesBackEveryHeldFrame) {
  ASSERT_EQ(record(key(1), piece(1480, 1480, true)), FragmentSeen::undecided);
  ASSERT_TRUE(table_.hold(slot_, 0x1000, 100, 0));
  ASSERT_EQ(record(key(2), piece(1480, 1480, true)), FragmentSeen::undecided);
  ASSERT_TRUE(table_.hold(slot_, 0x2000, 100, 0));
  std::vector<std::uint64_t> dropped;
  table_.clear([&](const FragmentTable::HeldFrame& h) { dropped.push_back(h.addr); });
  EXPECT_EQ(dropped, (std::vector<std::uint64_t>{0x1000, 0x2000}));
  EXPECT_EQ(table_.held_count(), 0u);
  EXPECT_EQ(table_.held_bytes(), 0u);
}

TEST(FragmentTable, DatagramsMustBeAPowerOfTwoOfAtLeastOneBucket) {
  EXPECT_THROW(FragmentTable({.datagrams = 2}), std::invalid_argument);
  EXPECT_THROW(FragmentTable({.datagrams = 1000}), std::invalid_argument);
  EXPECT_NO_THROW(FragmentTable({.datagrams = 4}));
}

TEST_F(FragmentTableTest, ARefusalLastsTheHeldTimeoutThenTheKeyStartsAfresh) {
  use({.idle_timeout_ms = 30000, .held_timeout_ms = 1000});
  ASSERT_EQ(record(key(1), piece(0, 1480, true), 0), FragmentSeen::undecided);
  ASSERT_EQ(record(key(1), piece(1400, 1480, true), 100), FragmentSeen::overlap);
  // Fragments with the key keep it alive, but not its refusal.
  EXPECT_EQ(record(key(1), piece(2880, 100, false), 600), FragmentSeen::refused);
  EXPECT_EQ(record(key(1), piece(1480, 1480, true), 1099), FragmentSeen::refused);
  EXPECT_EQ(record(key(1), piece(1480, 1480, true), 1100), FragmentSeen::undecided)
      << "a new datagram with the reused identification";
  EXPECT_FALSE(table_.refused(slot_));
  EXPECT_EQ(table_.datagrams_in_use(), 1u);
}

TEST_F(FragmentTableTest, ReusedIdentificationsAtAHighRateAreNewDatagramsNotDuplicates) {
  // A sender wrapping its 16-bit identification every half second: each datagram completes, and
  // the next one with its identification is forwarded, not dropped as a repeat.
  for (std::uint32_t round = 0; round < 3; ++round) {
    for (std::uint32_t id = 1; id <= 8; ++id) {
      ASSERT_EQ(record(key(id), piece(0, 1480, true), round * 500), FragmentSeen::undecided)
          << round << " " << id;
      table_.decide(slot_, kToBackend);
      ASSERT_EQ(record(key(id), piece(1480, 528, false), round * 500), FragmentSeen::decided)
          << round << " " << id;
    }
  }
}

TEST_F(FragmentTableTest, AnIncompleteDatagramIsOverAfterMaxDistanceFragmentsOfOthers) {
  use({.datagrams = 64, .max_distance = 10});
  // Id 1's second fragment is lost: its first stays recorded, incomplete.
  ASSERT_EQ(record(key(1), piece(0, 1480, true), 0), FragmentSeen::undecided);
  table_.decide(slot_, kToBackend);
  const std::uint32_t slot = slot_;
  for (std::uint32_t id = 2; id <= 10; ++id) {  // 9 fragments of others
    ASSERT_EQ(record(key(id), piece(1480, 100, false), 0), FragmentSeen::undecided);
  }
  EXPECT_EQ(record(key(1), piece(0, 1480, true), 0), FragmentSeen::duplicate)
      << "9 fragments between: still the same datagram";
  for (std::uint32_t id = 11; id <= 21; ++id) {  // 11 fragments of others
    ASSERT_EQ(record(key(id), piece(1480, 100, false), 0), FragmentSeen::undecided);
  }
  EXPECT_EQ(record(key(1), piece(0, 1480, true), 0), FragmentSeen::undecided)
      << "the identification came round again: a new datagram";
  EXPECT_EQ(slot_, slot);
}

}  // namespace
}  // namespace ferry::fastpath
