// The UDP flow affinity table on its own: entries, full-key compare, expiry, eviction, and what
// an entry does when the service table it was made on is rebuilt.
#include "lib/fastpath/flow_table.hh"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "lib/packet/balance.hh"
#include "tests/unit/fastpath/lab_tables.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using packet::MaglevTable;

constexpr std::uint64_t kSeed = packet::kDefaultFlowHashSeed;
constexpr std::uint32_t kTimeout = 1000;

packet::ParsedPacket request_of(std::uint16_t client_port, const std::string& client = "10.1.0.5") {
  packet::ParsedPacket p;
  p.src_address = addr(client);
  p.dst_address = addr("10.0.0.10");
  p.src_port = client_port;
  p.dst_port = 53;
  p.protocol = IPPROTO_UDP;
  return p;
}

packet::ServiceTable services(std::vector<std::string> backends,
                              packet::ServiceTableOptions options = {}) {
  config::Config c = lab_config(std::move(backends));
  return packet::build_service_table(c.services, options);
}

packet::ServiceTableOptions down(std::string endpoint) {
  packet::ServiceTableOptions o;
  o.backend_up = [endpoint](const config::ServiceConfig&, const net::Endpoint& b) {
    return b.to_string() != endpoint;
  };
  return o;
}

const packet::Service& dns(const packet::ServiceTable& t) {
  return t.services().front();
}

std::string backend_name(const packet::ServiceTable& t, std::uint16_t index) {
  return index == MaglevTable::kNoBackend ? "none" : dns(t).backends.at(index).to_string();
}

class FlowTableTest : public ::testing::Test {
 protected:
  std::uint16_t lookup(FlowTable& table, const packet::ServiceTable& t,
                       const packet::ParsedPacket& p, std::uint32_t now_ms) {
    return table.backend_for(dns(t), p, t.flow_hash_seed(), now_ms);
  }
  std::uint16_t maglev(const packet::ServiceTable& t, const packet::ParsedPacket& p) {
    return packet::choose_backend(dns(t), p, t.flow_hash_seed());
  }

  FlowCounters counters_;
  packet::ServiceTable three_ = services({"10.2.0.2:53", "10.2.0.3:53", "10.2.0.4:53"});
};

TEST_F(FlowTableTest, FirstPacketInsertsLaterOnesHitAndRefresh) {
  FlowTable table(64, kTimeout, counters_);
  packet::ParsedPacket p = request_of(40000);
  std::uint16_t first = lookup(table, three_, p, 100);
  EXPECT_EQ(first, maglev(three_, p)) << "a new flow gets Maglev's choice";
  EXPECT_EQ(table.entries_in_use(), 1u);
  EXPECT_EQ(counters_.entries.value(), 1);
  EXPECT_EQ(counters_.misses.value(), 1u);
  // Each packet restarts the idle clock: 900 ms apart, 1.8 s in all, under a 1 s timeout.
  EXPECT_EQ(lookup(table, three_, p, 1000), first);
  EXPECT_EQ(lookup(table, three_, p, 1900), first);
  EXPECT_EQ(counters_.hits.value(), 2u);
  EXPECT_EQ(counters_.misses.value(), 1u);
  EXPECT_EQ(counters_.expiries.value(), 0u);
  EXPECT_EQ(table.entries_in_use(), 1u);
}

TEST_F(FlowTableTest, FlowsWithTheSameBucketAndTagAreToldApartByTheirFullKey) {
  FlowTable table(FlowTable::kWays, kTimeout, counters_);  // one bucket: every flow collides
  packet::ParsedPacket a = request_of(40000);
  const std::uint8_t tag = FlowTable::tag_of(packet::flow_hash(a, FlowTable::kHashSeed));
  std::uint16_t port = 40001;
  while (FlowTable::tag_of(packet::flow_hash(request_of(port), FlowTable::kHashSeed)) != tag)
    ++port;
  packet::ParsedPacket b = request_of(port);  // same bucket, same tag, another source port
  lookup(table, three_, a, 0);
  lookup(table, three_, b, 0);
  EXPECT_EQ(counters_.misses.value(), 2u) << "b is a flow of its own, not a hit on a's entry";
  EXPECT_EQ(table.entries_in_use(), 2u);
  EXPECT_EQ(lookup(table, three_, a, 1), maglev(three_, a));
  EXPECT_EQ(lookup(table, three_, b, 1), maglev(three_, b));
  EXPECT_EQ(counters_.hits.value(), 2u);

  // Every field of the key counts: other client address, other VIP port, IPv6.
  packet::ParsedPacket other_client = request_of(40000, "10.1.0.6");
  packet::ParsedPacket other_port = a;
  other_port.dst_port = 54;
  lookup(table, three_, other_client, 2);
  lookup(table, three_, other_port, 2);
  EXPECT_EQ(counters_.misses.value(), 4u);
}

TEST_F(FlowTableTest, IdleFlowsExpireOnLookupAndInTheSweep) {
  FlowTable table(64, kTimeout, counters_);
  packet::ParsedPacket p = request_of(40000);
  packet::ParsedPacket q = request_of(40001);
  lookup(table, three_, p, 0);
  lookup(table, three_, q, 0);
  lookup(table, three_, p, kTimeout - 1);
  EXPECT_EQ(counters_.hits.value(), 1u) << "idle 999 ms of 1000: still there";
  lookup(table, three_, p, 2 * kTimeout - 1);
  EXPECT_EQ(counters_.expiries.value(), 1u) << "idle 1000 ms: gone, and the flow starts over";
  EXPECT_EQ(counters_.misses.value(), 3u);
  EXPECT_EQ(table.entries_in_use(), 2u);

  // q, idle since 0, is freed by the sweep without a packet of its own; p, seen at 1999, stays.
  EXPECT_EQ(table.sweep(2 * kTimeout - 1, table.capacity()), 1u);
  EXPECT_EQ(table.entries_in_use(), 1u);
  EXPECT_EQ(counters_.entries.value(), 1);
  EXPECT_EQ(counters_.expiries.value(), 2u);
  EXPECT_EQ(table.sweep(3 * kTimeout - 2, table.capacity()), 0u);
  EXPECT_EQ(table.sweep(3 * kTimeout - 1, table.capacity()), 1u);
  EXPECT_EQ(table.entries_in_use(), 0u);
}

TEST_F(FlowTableTest, TheSweepLooksAtAtMostItsBudgetOfSlotsPerCall) {
  FlowTable table(64, kTimeout, counters_);  // 8 buckets
  for (std::uint16_t port = 40000; port < 40040; ++port) lookup(table, three_, request_of(port), 0);
  std::uint32_t in_use = table.entries_in_use();
  std::uint32_t freed = 0;
  for (int bucket = 0; bucket < 8; ++bucket) {
    std::uint32_t n = table.sweep(kTimeout, FlowTable::kWays);
    EXPECT_LE(n, FlowTable::kWays);
    freed += n;
  }
  EXPECT_EQ(freed, in_use) << "eight one-bucket sweeps go round the table once";
  EXPECT_EQ(table.entries_in_use(), 0u);
}

TEST_F(FlowTableTest, AFullBucketEvictsItsLeastRecentlySeenFlowAndCountsIt) {
  FlowTable table(FlowTable::kWays, 100 * kTimeout, counters_);
  std::vector<packet::ParsedPacket> flows;
  for (std::uint16_t i = 0; i < FlowTable::kWays; ++i) {
    flows.push_back(request_of(40000 + i));
    lookup(table, three_, flows.back(), 1 + i);  // flow i last seen at i + 1
  }
  lookup(table, three_, flows[0], 20);  // now flows[1] is the least recently seen
  EXPECT_EQ(counters_.evictions.value(), 0u);
  lookup(table, three_, request_of(50000), 21);
  EXPECT_EQ(counters_.evictions.value(), 1u);
  EXPECT_EQ(table.entries_in_use(), FlowTable::kWays);
  std::uint64_t hits = counters_.hits.value();
  lookup(table, three_, flows[0], 22);
  lookup(table, three_, flows[2], 22);
  EXPECT_EQ(counters_.hits.value(), hits + 2) << "the refreshed and the younger flows stay";
  std::uint64_t misses = counters_.misses.value();
  lookup(table, three_, flows[1], 23);
  EXPECT_EQ(counters_.misses.value(), misses + 1) << "flows[1] was the one evicted";
  EXPECT_EQ(counters_.evictions.value(), 2u);
  EXPECT_EQ(counters_.expiries.value(), 0u);
}

TEST_F(FlowTableTest, AnExpiredFlowIsReplacedBeforeALiveOneIsEvicted) {
  FlowTable table(FlowTable::kWays, kTimeout, counters_);
  for (std::uint16_t i = 0; i < FlowTable::kWays; ++i) {
    lookup(table, three_, request_of(40000 + i), i == 5 ? 0 : 2 * kTimeout);
  }
  lookup(table, three_, request_of(50000), 2 * kTimeout + 1);
  EXPECT_EQ(counters_.evictions.value(), 0u);
  EXPECT_EQ(counters_.expiries.value(), 1u);
  EXPECT_EQ(table.entries_in_use(), FlowTable::kWays);
}

TEST_F(FlowTableTest, TheCapacityBoundsTheEntriesWhateverTheNumberOfFlows) {
  FlowTable table(16, kTimeout, counters_);
  for (std::uint32_t i = 0; i < 10000; ++i) {
    lookup(table, three_, request_of(static_cast<std::uint16_t>(i), "10.1.0.7"), 5);
    ASSERT_LE(table.entries_in_use(), 16u);
    ASSERT_EQ(counters_.entries.value(), static_cast<std::int64_t>(table.entries_in_use()));
  }
  EXPECT_EQ(table.entries_in_use(), 16u);
  EXPECT_EQ(counters_.misses.value(), 10000u);
  EXPECT_EQ(counters_.evictions.value(), 10000u - 16u) << "every miss into a full bucket evicts";
}

// 2000 flows seen on `before` at `t` (their backends into `made`), then on the rebuilt `next` at
// t + 10. Returns flow -> backend on `next`.
std::map<std::uint16_t, std::string> replay(FlowTable& table, const packet::ServiceTable& before,
                                            const packet::ServiceTable& next, std::uint32_t t,
                                            std::map<std::uint16_t, std::string>* made = nullptr) {
  std::map<std::uint16_t, std::string> after;
  for (std::uint16_t port = 1000; port < 3000; ++port) {
    packet::ParsedPacket p = request_of(port);
    std::uint16_t b = table.backend_for(dns(before), p, before.flow_hash_seed(), t);
    if (made) (*made)[port] = backend_name(before, b);
  }
  for (std::uint16_t port = 1000; port < 3000; ++port) {
    packet::ParsedPacket p = request_of(port);
    after[port] =
        backend_name(next, table.backend_for(dns(next), p, next.flow_hash_seed(), t + 10));
  }
  return after;
}

TEST_F(FlowTableTest, AFlowKeepsItsBackendThroughARebuiltTableThatMovedItsIndex) {
  FlowTable table(65536, kTimeout, counters_);
  // A backend added in front: every old backend's index moves up by one, and Maglev alone would
  // move about a quarter of the flows to the new one.
  packet::ServiceTable four =
      services({"10.2.0.9:53", "10.2.0.2:53", "10.2.0.3:53", "10.2.0.4:53"});
  std::map<std::uint16_t, std::string> made;
  std::map<std::uint16_t, std::string> after = replay(table, three_, four, 0, &made);
  EXPECT_EQ(after, made);
  int maglev_moves = 0;
  for (const auto& [port, backend] : made) {
    maglev_moves += backend_name(four, maglev(four, request_of(port))) != backend;
  }
  EXPECT_GT(maglev_moves, 300) << "the table, not Maglev, kept them";
  EXPECT_EQ(counters_.hits.value(), 2000u);
  EXPECT_EQ(counters_.reassigned.value(), 0u);
  // The entries now carry the new indices: a second pass needs no search (same answers).
  EXPECT_EQ(replay(table, four, four, 100), made);
}

TEST_F(FlowTableTest, FlowsOfARemovedOrDownBackendGetMaglevsChoiceAndKeepIt) {
  for (bool removed : {true, false}) {
    SCOPED_TRACE(removed ? "removed" : "down by health");
    FlowCounters counters;
    FlowTable table(65536, kTimeout, counters);
    packet::ServiceTable next =
        removed ? services({"10.2.0.2:53", "10.2.0.4:53"})
                : services({"10.2.0.2:53", "10.2.0.3:53", "10.2.0.4:53"}, down("10.2.0.3:53"));
    std::map<std::uint16_t, std::string> made;
    std::map<std::uint16_t, std::string> after = replay(table, three_, next, 0, &made);
    std::uint64_t moved = 0;
    for (const auto& [port, backend] : made) {
      if (backend == "10.2.0.3:53") {
        ++moved;
        EXPECT_EQ(after[port], backend_name(next, maglev(next, request_of(port))));
        EXPECT_NE(after[port], backend);
      } else {
        EXPECT_EQ(after[port], backend) << "only the lost backend's flows move";
      }
    }
    EXPECT_GT(moved, 500u);
    EXPECT_EQ(counters.reassigned.value(), moved);
    // The entries were rewritten: the moved flows stay on their new backend, even when .3 is back.
    EXPECT_EQ(replay(table, next, three_, 100), after);
  }
}

TEST_F(FlowTableTest, AServiceWithNoBackendUpGetsNoneAndNoEntry) {
  FlowTable table(64, kTimeout, counters_);
  packet::ServiceTableOptions none_up;
  none_up.backend_up = [](const config::ServiceConfig&, const net::Endpoint&) { return false; };
  packet::ServiceTable dark = services({"10.2.0.2:53"}, none_up);
  EXPECT_EQ(lookup(table, dark, request_of(40000), 0), MaglevTable::kNoBackend);
  EXPECT_EQ(table.entries_in_use(), 0u);
  EXPECT_EQ(counters_.misses.value(), 0u);
}

TEST_F(FlowTableTest, ZeroEntriesIsOffAndEveryRequestIsMaglevs) {
  FlowTable table(0, kTimeout, counters_);
  EXPECT_FALSE(table.enabled());
  EXPECT_EQ(table.memory_bytes(), 0u);
  for (std::uint16_t port = 0; port < 500; ++port) {
    packet::ParsedPacket p = request_of(port);
    ASSERT_EQ(lookup(table, three_, p, port), maglev(three_, p));
  }
  EXPECT_EQ(table.sweep(1000, 1000), 0u);
  EXPECT_EQ(counters_.hits.value() + counters_.misses.value(), 0u);
  EXPECT_EQ(counters_.entries.value(), 0);
}

TEST_F(FlowTableTest, SizesOtherThanAPowerOfTwoOfAtLeastABucketAreRefused) {
  for (std::uint32_t entries : {1u, 4u, 12u, 65535u, FlowTable::kMaxEntries * 2}) {
    EXPECT_THROW(FlowTable(entries, kTimeout, counters_), std::invalid_argument) << entries;
  }
  EXPECT_THROW(FlowTable(64, 0, counters_), std::invalid_argument);
  FlowTable table(65536, 30000, counters_);
  EXPECT_EQ(table.capacity(), 65536u);
  EXPECT_EQ(table.memory_bytes(), 65536u * 65u) << "64 B entry + 1 B tag";
}

// A handover: the flows of one ferryd's table, carried into the next ferryd's table of the same
// size, keep their backends there as they would have in the old one.
TEST_F(FlowTableTest, CarriedFlowsKeepTheirBackendsInAFreshTableOfTheSameCapacity) {
  FlowTable old_table(65536, kTimeout, counters_);
  std::map<std::uint16_t, std::string> made;
  for (std::uint16_t port = 1000; port < 3000; ++port) {
    made[port] = backend_name(three_, lookup(old_table, three_, request_of(port), 0));
  }
  FlowTable::Carried carried = old_table.carry();
  EXPECT_EQ(carried.capacity, 65536u);
  ASSERT_EQ(carried.slots.size(), old_table.entries_in_use());
  ASSERT_EQ(carried.tags.size(), carried.slots.size());
  ASSERT_EQ(carried.entries.size(), carried.slots.size());
  for (std::uint8_t tag : carried.tags) EXPECT_NE(tag, 0u);
  EXPECT_EQ(std::set<std::uint32_t>(carried.slots.begin(), carried.slots.end()).size(),
            carried.slots.size());

  FlowCounters new_counters;
  FlowTable new_table(65536, kTimeout, new_counters);
  ASSERT_TRUE(new_table.take(carried));
  EXPECT_EQ(new_table.entries_in_use(), old_table.entries_in_use());
  EXPECT_EQ(new_counters.entries.value(), static_cast<std::int64_t>(old_table.entries_in_use()));

  // The backend set changed across the upgrade (one added in front, every index moved): the
  // carried entries, not Maglev, answer, exactly as the old table would have.
  packet::ServiceTable four =
      services({"10.2.0.9:53", "10.2.0.2:53", "10.2.0.3:53", "10.2.0.4:53"});
  int maglev_moves = 0;
  for (const auto& [port, backend] : made) {
    EXPECT_EQ(backend_name(four, lookup(new_table, four, request_of(port), 10)), backend) << port;
    maglev_moves += backend_name(four, maglev(four, request_of(port))) != backend;
  }
  EXPECT_GT(maglev_moves, 300) << "without the carried entries, these flows would have moved";
  EXPECT_EQ(new_counters.hits.value(), 2000u);
  EXPECT_EQ(new_counters.misses.value(), 0u);
  EXPECT_EQ(new_counters.reassigned.value(), 0u);
}

TEST_F(FlowTableTest, CarriedFlowsKeepTheirAgesAndExpireOnTime) {
  FlowTable old_table(64, kTimeout, counters_);
  lookup(old_table, three_, request_of(40000), 100);
  lookup(old_table, three_, request_of(40001), 500);
  FlowCounters new_counters;
  FlowTable new_table(64, kTimeout, new_counters);
  ASSERT_TRUE(new_table.take(old_table.carry()));
  EXPECT_EQ(new_table.entries_in_use(), 2u);
  EXPECT_EQ(new_table.sweep(100 + kTimeout, new_table.capacity()), 1u) << "the one seen at 100";
  EXPECT_EQ(new_table.sweep(500 + kTimeout, new_table.capacity()), 1u) << "the one seen at 500";
  EXPECT_EQ(new_table.entries_in_use(), 0u);
}

TEST_F(FlowTableTest, AnEmptyTableCarriesNothing) {
  FlowTable old_table(64, kTimeout, counters_);
  FlowTable::Carried carried = old_table.carry();
  EXPECT_EQ(carried.capacity, 64u);
  EXPECT_TRUE(carried.slots.empty());
  FlowCounters new_counters;
  FlowTable new_table(64, kTimeout, new_counters);
  EXPECT_TRUE(new_table.take(carried));
  EXPECT_EQ(new_table.entries_in_use(), 0u);
}

TEST_F(FlowTableTest, ATableOfAnotherCapacityTakesNothing) {
  FlowTable old_table(64, kTimeout, counters_);
  for (std::uint16_t port = 40000; port < 40020; ++port) {
    lookup(old_table, three_, request_of(port), 0);
  }
  FlowTable::Carried carried = old_table.carry();
  ASSERT_FALSE(carried.slots.empty());
  for (std::uint32_t capacity : {128u, 32u, 0u}) {
    SCOPED_TRACE(capacity);
    FlowCounters new_counters;
    FlowTable new_table(capacity, kTimeout, new_counters);
    EXPECT_FALSE(new_table.take(carried));
    EXPECT_EQ(new_table.entries_in_use(), 0u);
    EXPECT_EQ(new_counters.entries.value(), 0);
    if (capacity == 0) continue;
    lookup(new_table, three_, request_of(40000), 1);
    EXPECT_EQ(new_counters.misses.value(), 1u) << "the flow starts over on Maglev's choice";
  }
}

TEST_F(FlowTableTest, TakeRefusesASlotOutOfRangeOrGivenTwice) {
  FlowTable old_table(64, kTimeout, counters_);
  for (std::uint16_t port = 40000; port < 40004; ++port) {
    lookup(old_table, three_, request_of(port), 0);
  }
  const FlowTable::Carried good = old_table.carry();
  ASSERT_GE(good.slots.size(), 2u);

  FlowTable::Carried out_of_range = good;
  out_of_range.slots.back() = 64;
  FlowTable::Carried twice = good;
  twice.slots[1] = twice.slots[0];
  FlowTable::Carried free_tag = good;
  free_tag.tags[0] = 0;  // 0 marks a free slot: not a flow
  FlowTable::Carried short_tags = good;
  short_tags.tags.pop_back();
  FlowTable::Carried short_entries = good;
  short_entries.entries.pop_back();
  for (const auto& [what, carried] :
       {std::pair{"slot out of range", &out_of_range}, std::pair{"slot twice", &twice},
        std::pair{"free tag", &free_tag}, std::pair{"fewer tags", &short_tags},
        std::pair{"fewer entries", &short_entries}}) {
    SCOPED_TRACE(what);
    FlowCounters new_counters;
    FlowTable new_table(64, kTimeout, new_counters);
    EXPECT_THROW(new_table.take(*carried), std::invalid_argument);
  }
}

TEST(FlowTableClock, IsMonotonicMilliseconds) {
  std::uint32_t a = FlowTable::clock_ms();
  std::uint32_t b = FlowTable::clock_ms();
  EXPECT_LT(b - a, 1000u);
}

}  // namespace
}  // namespace ferry::fastpath
