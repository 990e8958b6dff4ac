// PeerBudget, the control connection budgets as pure accounting: the admin reserve, the budget
// of each uid, the unauthenticated pool and its per-source budget, promotion on authentication,
// and release when a lease ends.
#include "lib/control/peer_budget.hh"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

namespace ferry::control {
namespace {

// Small numbers so every edge is reachable: 20 in all, 4 reserved for admins, 6 in the
// unauthenticated pool (2 per source), so local peers share 10, 3 per uid.
PeerBudgetLimits small() {
  return PeerBudgetLimits{.max_connections = 20,
                          .admin_reserved = 4,
                          .per_uid = 3,
                          .unauthenticated = 6,
                          .unauthenticated_per_source = 2};
}

PeerLease take(PeerAdmission admission) {
  EXPECT_TRUE(std::holds_alternative<PeerLease>(admission))
      << "refused: " << to_string(std::get<Refusal>(admission));
  return std::holds_alternative<PeerLease>(admission) ? std::get<PeerLease>(std::move(admission))
                                                      : PeerLease();
}

std::string refusal(const PeerAdmission& admission) {
  return std::holds_alternative<Refusal>(admission)
             ? std::string(to_string(std::get<Refusal>(admission)))
             : std::string("admitted");
}

TEST(PeerBudget, LocalSharesWhatTheReserveAndThePoolLeave) {
  EXPECT_EQ(PeerBudget(small()).local_share(), 10u);
  // TCP control off: no pool comes out of the total.
  PeerBudget without_tcp(
      PeerBudgetLimits{.max_connections = 20, .admin_reserved = 4, .unauthenticated = 0});
  EXPECT_EQ(without_tcp.local_share(), 16u);
}

TEST(PeerBudget, AUidGetsItsBudgetAndNoMore) {
  PeerBudget budget(small());
  std::vector<PeerLease> held;
  for (int i = 0; i < 3; ++i) held.push_back(take(budget.admit_local(1000)));
  EXPECT_EQ(refusal(budget.admit_local(1000)), "per_uid");
  EXPECT_EQ(budget.held_by_uid(1000), 3u);
  // Another uid has a budget of its own.
  held.push_back(take(budget.admit_local(1001)));
  EXPECT_EQ(budget.open(PeerClass::local), 4u);
}

TEST(PeerBudget, LocalPeersTogetherCannotTakeTheAdminReserve) {
  PeerBudget budget(small());
  std::vector<PeerLease> held;
  for (uid_t uid : {1000, 1001, 1002}) {
    for (int i = 0; i < 3; ++i) held.push_back(take(budget.admit_local(uid)));
  }
  held.push_back(take(budget.admit_local(1003)));
  EXPECT_EQ(budget.open(PeerClass::local), 10u);
  EXPECT_EQ(refusal(budget.admit_local(1003)), "reserved");
  EXPECT_EQ(refusal(budget.admit_local(2000)), "reserved");
  // A uid at its own budget is told so first, so the log names the one that filled it.
  EXPECT_EQ(refusal(budget.admit_local(1000)), "per_uid");
  for (int i = 0; i < 4; ++i) held.push_back(take(budget.admit_admin()));
  EXPECT_EQ(budget.open(PeerClass::admin), 4u);
}

TEST(PeerBudget, AdminsMayTakeEverySlotAndOnlyThatManyInAll) {
  PeerBudget budget(small());
  std::vector<PeerLease> held;
  for (int i = 0; i < 20; ++i) held.push_back(take(budget.admit_admin()));
  EXPECT_EQ(refusal(budget.admit_admin()), "limit");
  EXPECT_EQ(refusal(budget.admit_local(1000)), "limit");
  EXPECT_EQ(refusal(budget.admit_unauthenticated("192.0.2.1")), "limit");
  held.pop_back();
  EXPECT_EQ(budget.open(), 19u);
  held.push_back(take(budget.admit_admin()));
}

TEST(PeerBudget, AnAdminIsAdmittedWhileEveryOtherClassHoldsAllItMay) {
  PeerBudget budget(small());
  std::vector<PeerLease> held;
  for (uid_t uid = 1000; budget.open(PeerClass::local) < budget.local_share(); ++uid) {
    while (budget.held_by_uid(uid) < 3 && budget.open(PeerClass::local) < budget.local_share()) {
      held.push_back(take(budget.admit_local(uid)));
    }
  }
  for (int source = 1; budget.open(PeerClass::unauthenticated) < 6; ++source) {
    std::string address = "192.0.2." + std::to_string(source);
    held.push_back(take(budget.admit_unauthenticated(address)));
    held.push_back(take(budget.admit_unauthenticated(address)));
  }
  EXPECT_EQ(refusal(budget.admit_local(5000)), "reserved");
  EXPECT_EQ(refusal(budget.admit_unauthenticated("198.51.100.1")), "unauthenticated");
  for (int i = 0; i < 4; ++i) held.push_back(take(budget.admit_admin()));
  EXPECT_EQ(budget.open(), 20u);
}

// The whole budget of `source` in the unauthenticated pool; one more is refused.
std::vector<PeerLease> fill_source(PeerBudget& budget, const std::string& source) {
  std::vector<PeerLease> held;
  while (held.size() < budget.limits().unauthenticated_per_source) {
    held.push_back(take(budget.admit_unauthenticated(source)));
  }
  EXPECT_EQ(refusal(budget.admit_unauthenticated(source)), "per_source");
  EXPECT_EQ(budget.held_by_source(source), held.size());
  return held;
}

TEST(PeerBudget, AnAddressGetsItsShareOfTheUnauthenticatedPool) {
  PeerBudget budget(small());
  std::vector<PeerLease> held = fill_source(budget, "192.0.2.1");
  PeerLease c = take(budget.admit_unauthenticated("192.0.2.2"));
  EXPECT_EQ(budget.open(PeerClass::unauthenticated), 3u);
  // Local peers do not draw on the pool, nor it on theirs.
  EXPECT_EQ(budget.local_share(), 10u);
}

TEST(PeerBudget, AuthenticatingMovesAConnectionFromThePoolToAdmin) {
  PeerBudget budget(small());
  std::vector<PeerLease> held = fill_source(budget, "192.0.2.1");
  PeerLease& a = held[0];
  budget.promote_to_admin(a);
  EXPECT_EQ(a.slot().peer_class, PeerClass::admin);
  EXPECT_EQ(budget.open(PeerClass::admin), 1u);
  EXPECT_EQ(budget.open(PeerClass::unauthenticated), 1u);
  EXPECT_EQ(budget.held_by_source("192.0.2.1"), 1u);
  EXPECT_EQ(budget.open(), 2u);
  // The address may open another connection to authenticate with.
  PeerLease c = take(budget.admit_unauthenticated("192.0.2.1"));
  a.reset();
  EXPECT_EQ(budget.open(PeerClass::admin), 0u);
  EXPECT_EQ(budget.open(), 2u);
  // Promoting what is not unauthenticated changes nothing.
  PeerLease d = take(budget.admit_local(1000));
  budget.promote_to_admin(d);
  EXPECT_EQ(d.slot().peer_class, PeerClass::local);
}

TEST(PeerBudget, EndedLeasesGiveTheirSlotsBackAndForgetTheirKeys) {
  PeerBudget budget(small());
  {
    std::vector<PeerLease> held;
    for (int i = 0; i < 3; ++i) held.push_back(take(budget.admit_local(1000)));
    held.push_back(take(budget.admit_unauthenticated("192.0.2.1")));
    held.push_back(take(budget.admit_admin()));
    PeerLease moved = std::move(held.front());
    EXPECT_EQ(budget.open(), 5u);  // a move is not a release
  }
  EXPECT_EQ(budget.open(), 0u);
  EXPECT_EQ(budget.held_by_uid(1000), 0u);
  EXPECT_EQ(budget.held_by_source("192.0.2.1"), 0u);
  for (int i = 0; i < 3; ++i) take(budget.admit_local(1000));  // each released at once
  EXPECT_EQ(budget.open(), 0u);
}

TEST(PeerBudget, ImpossibleLimitsAreClampedSoTheReserveHolds) {
  PeerBudget budget(PeerBudgetLimits{.max_connections = 10,
                                     .admin_reserved = 0,
                                     .per_uid = 0,
                                     .unauthenticated = 50,
                                     .unauthenticated_per_source = 0});
  EXPECT_EQ(budget.limits().admin_reserved, 1u);
  EXPECT_EQ(budget.limits().per_uid, 1u);
  EXPECT_EQ(budget.limits().unauthenticated, 9u);
  EXPECT_EQ(budget.local_share(), 0u);
  EXPECT_EQ(refusal(budget.admit_local(1000)), "reserved");
  PeerLease admin = take(budget.admit_admin());
}

TEST(PeerBudget, RefusalsNameThePeerAndTheKeyThatSetsTheBudget) {
  PeerBudget budget(small());
  EXPECT_EQ(budget.explain(Refusal::per_uid, "unix pid 7 uid 1000"),
            "unix pid 7 uid 1000: refusing a control connection: this uid holds 3, its budget "
            "(control.max_connections_per_uid)");
  EXPECT_EQ(budget.explain(Refusal::per_source, "tcp 192.0.2.1"),
            "tcp 192.0.2.1: refusing a TCP control connection: this address holds 2 that have "
            "not authenticated, its budget (control.tcp.max_unauthenticated_per_source)");
  EXPECT_NE(budget.explain(Refusal::reserved, "x").find("the other 10 are kept for admin peers"),
            std::string::npos);
  EXPECT_NE(budget.explain(Refusal::limit, "x").find("20 are open, the limit"), std::string::npos);
}

}  // namespace
}  // namespace ferry::control
