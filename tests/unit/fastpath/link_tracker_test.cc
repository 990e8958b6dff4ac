// LinkTracker: which fast-path interfaces are lost or back, decided from link messages.
#include "lib/fastpath/link_tracker.hh"

#include <gtest/gtest.h>
#include <net/if.h>

namespace ferry::fastpath {
namespace {

LinkMessage newlink(int ifindex, std::string name, bool up = true) {
  return {false, ifindex, std::move(name), up ? static_cast<std::uint32_t>(IFF_UP) : 0u};
}
LinkMessage dellink(int ifindex, std::string name) {
  return {true, ifindex, std::move(name), 0};
}

// `got` is an event of `kind` for `name` with these ifindexes (0 where the kind has none).
void expect_event(const std::optional<LinkEvent>& got, LinkEvent::Kind kind, const char* name,
                  int old_ifindex, int new_ifindex) {
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->kind, kind);
  EXPECT_EQ(got->name, name);
  EXPECT_EQ(got->old_ifindex, old_ifindex);
  EXPECT_EQ(got->new_ifindex, new_ifindex);
}

LinkTracker following_g0_g1() {
  LinkTracker t;
  t.follow({{"g0", 4}, {"g1", 6}});
  return t;
}

TEST(LinkTracker, DeletionOfABoundInterfaceIsLostOnce) {
  LinkTracker t = following_g0_g1();
  auto lost = t.handle(dellink(6, "g1"));
  ASSERT_NO_FATAL_FAILURE(expect_event(lost, LinkEvent::Kind::lost, "g1", 6, 0));
  EXPECT_TRUE(lost->renamed_to.empty());
  EXPECT_FALSE(t.handle(dellink(6, "g1")).has_value());
  EXPECT_TRUE(t.links()[1].gone);
  EXPECT_FALSE(t.links()[0].gone);
}

TEST(LinkTracker, OtherInterfacesAndStateChangesOfABoundOneAreNoEvents) {
  LinkTracker t = following_g0_g1();
  EXPECT_FALSE(t.handle(dellink(9, "b0")).has_value());
  EXPECT_FALSE(t.handle(newlink(9, "b0")).has_value());
  EXPECT_FALSE(t.handle(newlink(6, "g1", false)).has_value());  // set down: still bound
  EXPECT_FALSE(t.handle(newlink(6, "g1")).has_value());         // carrier change, same ifindex
}

TEST(LinkTracker, ReCreatedInterfaceReturnsWhenUpUnderItsNewIfindex) {
  LinkTracker t = following_g0_g1();
  ASSERT_TRUE(t.handle(dellink(6, "g1")).has_value());
  EXPECT_FALSE(t.handle(newlink(11, "g1", false)).has_value());  // created, still down
  expect_event(t.handle(newlink(11, "g1")), LinkEvent::Kind::returned, "g1", 6, 11);
  EXPECT_FALSE(t.handle(newlink(11, "g1")).has_value());  // the peer coming up: no second return
  // And the new one can be lost in turn.
  expect_event(t.handle(dellink(11, "g1")), LinkEvent::Kind::lost, "g1", 11, 0);
}

TEST(LinkTracker, ReplacementSeenWithoutItsDeletionStillReturns) {
  // Notifications overran: the deletion was never read, the new interface is.
  LinkTracker t = following_g0_g1();
  expect_event(t.handle(newlink(12, "g1")), LinkEvent::Kind::returned, "g1", 6, 12);
}

TEST(LinkTracker, RenameAwayIsLostAndRenameBackReturns) {
  LinkTracker t = following_g0_g1();
  auto lost = t.handle(newlink(4, "old-g0"));
  ASSERT_NO_FATAL_FAILURE(expect_event(lost, LinkEvent::Kind::lost, "g0", 4, 0));
  EXPECT_EQ(lost->renamed_to, "old-g0");
  expect_event(t.handle(newlink(4, "g0")), LinkEvent::Kind::returned, "g0", 4, 4);
}

TEST(LinkTracker, ReconcileReportsWhatADumpShowsOnlyOnce) {
  LinkTracker t = following_g0_g1();
  // g1 went between the bind and the dump.
  auto events = t.reconcile({newlink(1, "lo"), newlink(4, "g0")});
  ASSERT_EQ(events.size(), 1u);
  expect_event(events[0], LinkEvent::Kind::lost, "g1", 6, 0);
  EXPECT_TRUE(t.reconcile({newlink(1, "lo"), newlink(4, "g0")}).empty());
  events = t.reconcile({newlink(4, "g0"), newlink(15, "g1")});
  ASSERT_EQ(events.size(), 1u);
  expect_event(events[0], LinkEvent::Kind::returned, "g1", 6, 15);
}

TEST(LinkTracker, FollowStartsFromTheNewlyBoundIfindexes) {
  LinkTracker t = following_g0_g1();
  ASSERT_TRUE(t.handle(dellink(6, "g1")).has_value());
  t.follow({{"g0", 4}, {"g1", 15}});
  EXPECT_FALSE(t.links()[1].gone);
  EXPECT_FALSE(t.handle(dellink(6, "g1")).has_value());  // a late message of the old one
  EXPECT_FALSE(t.handle(newlink(15, "g1")).has_value());
  EXPECT_TRUE(t.reconcile({newlink(4, "g0"), newlink(15, "g1")}).empty());
}

}  // namespace
}  // namespace ferry::fastpath
