// SourceBudget, the metrics endpoint's connection budget as pure accounting: a share per client
// address within a total, and release when a lease ends.
#include "lib/metrics/source_budget.hh"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

namespace ferry::metrics {
namespace {

std::string outcome(const SourceAdmission& admission) {
  return std::holds_alternative<SourceRefusal>(admission)
             ? std::string(to_string(std::get<SourceRefusal>(admission)))
             : std::string("admitted");
}

SourceLease take(SourceAdmission admission) {
  EXPECT_EQ(outcome(admission), "admitted");
  return std::holds_alternative<SourceLease>(admission)
             ? std::get<SourceLease>(std::move(admission))
             : SourceLease();
}

TEST(SourceBudget, AnAddressHoldingItsWholeBudgetLeavesRoomForAnother) {
  SourceBudget budget(10, 3);
  std::vector<SourceLease> held;
  for (int i = 0; i < 3; ++i) held.push_back(take(budget.admit("192.0.2.1")));
  EXPECT_EQ(outcome(budget.admit("192.0.2.1")), "per_source");
  EXPECT_EQ(budget.held_by("192.0.2.1"), 3u);
  held.push_back(take(budget.admit("192.0.2.2")));
  EXPECT_EQ(budget.open(), 4u);
}

TEST(SourceBudget, TheTotalCapsEveryAddressTogether) {
  SourceBudget budget(4, 3);
  std::vector<SourceLease> held;
  for (int i = 0; i < 2; ++i) held.push_back(take(budget.admit("192.0.2.1")));
  for (int i = 0; i < 2; ++i) held.push_back(take(budget.admit("192.0.2.2")));
  EXPECT_EQ(outcome(budget.admit("192.0.2.3")), "limit");
  EXPECT_EQ(outcome(budget.admit("192.0.2.1")), "limit");
  // With both full, an address at its budget is told so, so the log names who filled it.
  SourceBudget small(4, 2);
  SourceLease a = take(small.admit("192.0.2.1"));
  SourceLease b = take(small.admit("192.0.2.1"));
  SourceLease c = take(small.admit("192.0.2.2"));
  SourceLease d = take(small.admit("192.0.2.2"));
  EXPECT_EQ(outcome(small.admit("192.0.2.1")), "per_source");
}

TEST(SourceBudget, EndedLeasesGiveTheirSlotsBackAndForgetTheAddress) {
  SourceBudget budget(2, 2);
  {
    SourceLease a = take(budget.admit("2001:db8::1"));
    SourceLease moved = std::move(a);
    SourceLease b = take(budget.admit("2001:db8::1"));
    EXPECT_EQ(budget.open(), 2u);  // a move is not a release
    EXPECT_EQ(outcome(budget.admit("2001:db8::2")), "limit");
  }
  EXPECT_EQ(budget.open(), 0u);
  EXPECT_EQ(budget.held_by("2001:db8::1"), 0u);
  SourceLease again = take(budget.admit("2001:db8::2"));
  again.reset();
  again.reset();  // idempotent
  EXPECT_EQ(budget.open(), 0u);
}

TEST(SourceBudget, BudgetsOfZeroAreTakenAsOne) {
  SourceBudget budget(0, 0);
  EXPECT_EQ(budget.max_connections(), 1u);
  EXPECT_EQ(budget.per_source(), 1u);
  SourceLease a = take(budget.admit("192.0.2.1"));
  EXPECT_EQ(outcome(budget.admit("192.0.2.1")), "per_source");
}

}  // namespace
}  // namespace ferry::metrics
