// IcmpRateLimit: the per-destination bucket (burst, one token per interval), the global one
// (per_second up to burst), and how they combine, on a clock the test drives.
#include "lib/packet/icmp_rate_limit.hh"

#include <gtest/gtest.h>

#include "tests/unit/packet/frame_builder.hh"

namespace ferry::packet {
namespace {

using test::addr;

const auto kA = addr("192.0.2.1");
const auto kB = addr("192.0.2.2");  // hashes to another slot than kA (checked below)

// How many of `tries` errors to `destination` at `now_ms` are allowed.
int allowed(IcmpRateLimit& limit, const std::array<std::uint8_t, 16>& destination,
            std::uint64_t now_ms, int tries) {
  int n = 0;
  for (int i = 0; i < tries; ++i) n += limit.allow(destination, now_ms) ? 1 : 0;
  return n;
}

// Only the per-destination bucket counts: the global one is far larger.
IcmpRateLimit::Limits per_destination_only() {
  return {.per_second = 1'000'000, .burst = 1'000'000};
}

TEST(IcmpRateLimit, DefaultsAllowABurstOfSixToOneDestination) {
  IcmpRateLimit limit;
  EXPECT_EQ(allowed(limit, kA, 5000, 10), 6);
  EXPECT_FALSE(limit.allow(kA, 5999));
  EXPECT_TRUE(limit.allow(kA, 6000));  // one token a second
  EXPECT_FALSE(limit.allow(kA, 6000));
}

TEST(IcmpRateLimit, PerDestinationRefillsOneTokenAnIntervalUpToTheBurst) {
  IcmpRateLimit limit(per_destination_only());
  ASSERT_EQ(allowed(limit, kA, 0, 6), 6);
  EXPECT_EQ(allowed(limit, kA, 2500, 10), 2);       // 2.5 intervals: two tokens, half a token left
  EXPECT_EQ(allowed(limit, kA, 3000, 10), 1);       // the half made whole
  EXPECT_EQ(allowed(limit, kA, 1'000'000, 10), 6);  // a long quiet time refills the burst only
}

TEST(IcmpRateLimit, DestinationsHaveBucketsOfTheirOwn) {
  IcmpRateLimit limit(per_destination_only());
  ASSERT_EQ(allowed(limit, kA, 0, 10), 6);
  EXPECT_EQ(allowed(limit, kB, 0, 10), 6) << "192.0.2.1 and 192.0.2.2 share a slot";
  EXPECT_EQ(allowed(limit, addr("2001:db8::1"), 0, 10), 6);
  EXPECT_FALSE(limit.allow(kA, 0));
}

TEST(IcmpRateLimit, TheGlobalBucketCapsEveryDestinationTogether) {
  // 100 a second (one each 10 ms), burst 5; no per-destination limit (interval 0).
  IcmpRateLimit limit({.per_second = 100, .burst = 5, .per_destination_interval_ms = 0});
  int sent = 0;
  for (int i = 0; i < 20; ++i) {
    std::array<std::uint8_t, 16> d = addr("198.51.100.0");
    d[3] = static_cast<std::uint8_t>(i);
    sent += limit.allow(d, 1000) ? 1 : 0;
  }
  EXPECT_EQ(sent, 5);
  EXPECT_FALSE(limit.allow(kA, 1009));
  EXPECT_TRUE(limit.allow(kA, 1010));
  EXPECT_FALSE(limit.allow(kB, 1010));
  // Over a long run the rate is per_second: 10 s after, 5 (the burst) then 1 per 10 ms.
  EXPECT_EQ(allowed(limit, kB, 11'000, 100), 5);
  int over_a_second = 0;
  for (std::uint64_t t = 11'001; t <= 12'000; ++t) over_a_second += limit.allow(kA, t) ? 1 : 0;
  EXPECT_EQ(over_a_second, 100);
}

TEST(IcmpRateLimit, RatesThatDoNotDivideASecondRefillWithoutDrift) {
  IcmpRateLimit limit({.per_second = 3, .burst = 2, .per_destination_interval_ms = 0});
  ASSERT_EQ(allowed(limit, kA, 0, 3), 2);
  int sent = 0;
  for (std::uint64_t t = 1; t <= 10'000; ++t) sent += limit.allow(kA, t) ? 1 : 0;
  EXPECT_EQ(sent, 30);  // 3 a second for 10 s: 333.3 ms apart, no token lost to rounding
}

TEST(IcmpRateLimit, ARefusalByOneBucketCostsTheOtherNothing) {
  IcmpRateLimit limit({.per_second = 1000,
                       .burst = 2,
                       .per_destination_interval_ms = 1000,
                       .per_destination_burst = 6});
  EXPECT_EQ(allowed(limit, kA, 0, 2), 2);
  EXPECT_FALSE(limit.allow(kA, 0));  // the global bucket is empty: kA keeps its four tokens
  EXPECT_EQ(allowed(limit, kA, 2, 2), 2);
  EXPECT_EQ(allowed(limit, kA, 4, 2), 2);
  EXPECT_FALSE(limit.allow(kA, 6));  // now kA's own bucket is empty, the global one is not...
  EXPECT_TRUE(limit.allow(kB, 6));   // ...as kB finds
}

TEST(IcmpRateLimit, ZeroBurstsAllowNothing) {
  IcmpRateLimit no_global({.per_second = 1000, .burst = 0});
  EXPECT_EQ(allowed(no_global, kA, 0, 5), 0);
  EXPECT_EQ(allowed(no_global, kA, 10'000, 5), 0);
  IcmpRateLimit no_destination({.per_destination_burst = 0});
  EXPECT_EQ(allowed(no_destination, kA, 0, 5), 0);
  EXPECT_EQ(allowed(no_destination, kA, 10'000, 5), 0);
}

TEST(IcmpRateLimit, AClockSteppingBackRefillsNothing) {
  IcmpRateLimit limit(per_destination_only());
  ASSERT_EQ(allowed(limit, kA, 10'000, 6), 6);
  EXPECT_EQ(allowed(limit, kA, 5'000, 3), 0);
  EXPECT_EQ(allowed(limit, kA, 10'999, 3), 0);
  EXPECT_EQ(allowed(limit, kA, 11'000, 3), 1);
}

// Many destinations and at most 256 slots: a bucket may be shared, never more generous. Each of
// 1,000 destinations sending its first error finds at most a burst shared among its slot.
TEST(IcmpRateLimit, SharedSlotsOnlyEverLimitMore) {
  IcmpRateLimit limit(per_destination_only());
  int sent = 0;
  for (int i = 0; i < 1000; ++i) {
    std::array<std::uint8_t, 16> d = addr("203.0.113.0");
    d[2] = static_cast<std::uint8_t>(i >> 8);
    d[3] = static_cast<std::uint8_t>(i);
    sent += allowed(limit, d, 0, 10);
  }
  EXPECT_LE(sent, 6 * static_cast<int>(IcmpRateLimit::kDestinationSlots));
  EXPECT_GE(sent, 6 * 200);  // and the hash spreads them: most slots are used
}

}  // namespace
}  // namespace ferry::packet
