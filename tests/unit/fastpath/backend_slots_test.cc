// Per-backend counter slots across table builds: a (service, backend) keeps its slot while any
// tables name it, a slot is free again only once no tables do, the lowest free one is taken
// (reused ones reported), and past the bound a backend is uncounted until a slot frees.
#include "lib/fastpath/backend_slots.hh"

#include <gtest/gtest.h>

#include <optional>

#include "tests/unit/fastpath/lab_tables.hh"

namespace ferry::fastpath {
namespace {

using test::endpoint;

const net::Endpoint kA = endpoint("10.2.0.2:53");
const net::Endpoint kB = endpoint("10.2.0.3:53");
const net::Endpoint kC = endpoint("10.2.0.4:53");
const net::Endpoint kD = endpoint("10.2.0.5:53");

TEST(BackendSlots, ABackendKeepsItsSlotAcrossBuilds) {
  BackendSlots slots;
  auto first = std::make_optional(slots.lease());
  EXPECT_EQ(first->take("dns", kA), 0u);
  EXPECT_EQ(first->take("dns", kB), 1u);
  // A reload: b first now, c added, a re-weighted; the old tables still live.
  BackendSlotLease second = slots.lease();
  EXPECT_EQ(second.take("dns", kB), 1u);
  EXPECT_EQ(second.take("dns", kC), 2u);
  EXPECT_EQ(second.take("dns", kA), 0u);
  first.reset();  // the old tables freed
  BackendSlotLease third = slots.lease();
  EXPECT_EQ(third.take("dns", kA), 0u);
  EXPECT_EQ(third.take("dns", kC), 2u);
  EXPECT_EQ(third.take("dns", kB), 1u);
  EXPECT_TRUE(second.reused().empty());
  EXPECT_TRUE(third.reused().empty());
  EXPECT_EQ(slots.used(), 3u);
}

TEST(BackendSlots, TheSameBackendInTwoServicesCountsInTwoSlots) {
  BackendSlots slots;
  BackendSlotLease lease = slots.lease();
  EXPECT_EQ(lease.take("web", kA), 0u);
  EXPECT_EQ(lease.take("web2", kA), 1u);
  EXPECT_EQ(slots.slot_of("web2", kA), 1u);
}

TEST(BackendSlots, ARemovedBackendsSlotIsFreeOnlyOnceNoTablesNameIt) {
  BackendSlots slots;
  auto old_tables = std::make_optional(slots.lease());
  old_tables->take("dns", kA);
  old_tables->take("dns", kB);
  // a removed: the tables without it are built, but workers may still count with the old ones.
  auto new_tables = std::make_optional(slots.lease());
  new_tables->take("dns", kB);
  EXPECT_EQ(slots.slot_of("dns", kA), 0u) << "still named by the old tables";
  EXPECT_EQ(slots.free(), slots.capacity() - 2);
  BackendSlotLease meanwhile = slots.lease();  // another build before the old tables go
  EXPECT_EQ(meanwhile.take("dns", kC), 2u) << "not a's slot";
  EXPECT_TRUE(meanwhile.reused().empty());
  {
    BackendSlotLease rolled_back = slots.lease();  // a back before the old tables went
    EXPECT_EQ(rolled_back.take("dns", kA), 0u) << "its old slot";
  }

  old_tables.reset();
  EXPECT_EQ(slots.slot_of("dns", kA), std::nullopt);
  BackendSlotLease later = slots.lease();
  EXPECT_EQ(later.take("dns", kB), 1u);
  EXPECT_EQ(later.take("dns", kD), 0u) << "the lowest free slot: a's";
  EXPECT_EQ(later.reused(), std::vector<std::uint32_t>{0});
}

TEST(BackendSlots, ABuildThatFailsGivesItsNewSlotsBack) {
  BackendSlots slots;
  BackendSlotLease running = slots.lease();
  running.take("dns", kA);
  {
    BackendSlotLease failed = slots.lease();
    failed.take("dns", kA);
    failed.take("dns", kB);
  }
  EXPECT_EQ(slots.used(), 1u);
  EXPECT_EQ(slots.slot_of("dns", kA), 0u);
  EXPECT_EQ(slots.slot_of("dns", kB), std::nullopt);
}

TEST(BackendSlots, PastTheBoundBackendsAreUncountedUntilASlotFrees) {
  BackendSlots slots(2);
  auto full = std::make_optional(slots.lease());
  EXPECT_EQ(full->take("dns", kA), 0u);
  EXPECT_EQ(full->take("dns", kB), 1u);
  EXPECT_EQ(full->take("dns", kC), packet::kNoCounterSlot);
  EXPECT_EQ(full->uncounted(), 1u);
  EXPECT_EQ(slots.free(), 0u);
  // a removed and c retried while the full tables live: still no room.
  BackendSlotLease retry = slots.lease();
  retry.take("dns", kB);
  EXPECT_EQ(retry.take("dns", kC), packet::kNoCounterSlot);
  full.reset();
  BackendSlotLease again = slots.lease();
  again.take("dns", kB);
  EXPECT_EQ(again.take("dns", kC), 0u);
  EXPECT_EQ(again.uncounted(), 0u);
}

TEST(BackendSlots, EachBuildHasItsOwnSerialAndAnEmptyLeaseCountsNothing) {
  BackendSlots slots;
  BackendSlotLease first = slots.lease();
  BackendSlotLease second = slots.lease();
  EXPECT_EQ(first.serial(), 1u);
  EXPECT_EQ(second.serial(), 2u);
  BackendSlotLease none;
  EXPECT_EQ(none.serial(), 0u);
  EXPECT_EQ(none.take("dns", kA), packet::kNoCounterSlot);
  BackendSlotLease moved = std::move(first);
  EXPECT_EQ(moved.serial(), 1u);
  EXPECT_EQ(moved.take("dns", kA), 0u);
  EXPECT_EQ(slots.used(), 1u);
}

TEST(BackendSlots, TheServiceTableAsksForEachBalancedBackendInOrder) {
  BackendSlots slots;
  config::Config c = test::lab_config();  // dns (balanced, three backends) and mirror (reflect)
  auto tables = test::config_tables(c, {}, &slots);
  const auto& services = tables->services.services();
  ASSERT_EQ(services.size(), 2u);
  EXPECT_EQ(services[0].counter_slots, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_TRUE(services[1].counter_slots.empty()) << "a reflect service has no backends";
  EXPECT_EQ(services[0].counter_slot(7), packet::kNoCounterSlot);
  EXPECT_EQ(slots.slot_of("dns", kC), 2u);
  tables.reset();
  EXPECT_EQ(slots.used(), 0u) << "freed with the tables";
}

}  // namespace
}  // namespace ferry::fastpath
