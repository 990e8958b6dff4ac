// The announcer against a real kernel table, in a network namespace of the test's own (a user
// namespace too when not root; skipped where neither can be had): stale routes cleared at
// construction, updates adding and removing, a route deleted behind its back restored by
// reconcile(), a table move, withdraw_all() sticking, the destructor withdrawing, report() and
// the ferry_announce_* metrics.
#include "lib/announce/announcer.hh"

#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/announce/addresses.hh"

namespace ferry::announce {
namespace {

VipPlan planned(const char* vip, bool announce, const std::string& reason = "because") {
  VipPlan p;
  p.vip = ip(vip);
  p.announce = announce;
  p.services = {"web"};
  p.reason = reason;
  return p;
}

config::AnnounceConfig table(std::uint32_t t) {
  config::AnnounceConfig c;
  c.table = t;
  return c;
}

// Empty when done, else why not.
std::string set_loopback_up(bool up) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  ifreq req{};
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ::ioctl(fd, SIOCGIFFLAGS, &req);
  if (rc == 0) {
    req.ifr_flags = static_cast<short>(up ? req.ifr_flags | IFF_UP : req.ifr_flags & ~IFF_UP);
    rc = ::ioctl(fd, SIOCSIFFLAGS, &req);
  }
  int err = errno;
  ::close(fd);
  return rc == 0 ? "" : std::string("setting lo up or down: ") + std::strerror(err);
}

// Empty when the namespace is ready, else why it could not be had.
std::string enter_private_netns() {
  if (::unshare(CLONE_NEWNET) != 0) {
    uid_t uid = ::geteuid();
    gid_t gid = ::getegid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
      return std::string("unshare: ") + std::strerror(errno);
    auto write = [](const char* path, const std::string& text) {
      FILE* f = std::fopen(path, "w");
      if (!f) return;
      std::fputs(text.c_str(), f);
      std::fclose(f);
    };
    write("/proc/self/setgroups", "deny");
    write("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
    write("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
  }
  return set_loopback_up(true);
}

std::set<std::string> routes_in(HostRoutes& routes, std::optional<std::uint32_t> t) {
  std::set<std::string> out;
  for (const auto& a : routes.list(t)) out.insert(a.to_string());
  return out;
}

std::optional<double> sample(const metrics::Registry& registry, const std::string& name,
                             const metrics::Labels& labels) {
  for (const auto& f : registry.snapshot()) {
    if (f.name != name) continue;
    for (const auto& s : f.samples) {
      if (s.labels == labels) return s.value;
    }
  }
  return std::nullopt;
}

class AnnouncerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setup_error_ = new std::string(enter_private_netns()); }
  void SetUp() override {
    // These need a network namespace of their own (root, or user namespaces): a machine that
    // cannot give one fails them rather than skipping them.
    ASSERT_TRUE(setup_error_->empty()) << "no network namespace: " << *setup_error_;
    kernel_.emplace();
    kernel_->clear(std::nullopt);
  }
  void TearDown() override {
    if (!kernel_) return;
    EXPECT_EQ(set_loopback_up(true), "");
    kernel_->clear(std::nullopt);
  }
  std::set<std::string> in(std::optional<std::uint32_t> t) { return routes_in(*kernel_, t); }

  static std::string* setup_error_;
  std::optional<HostRoutes> kernel_;  // the test's own view of the kernel, "someone else"
  metrics::Registry registry_;
};
std::string* AnnouncerTest::setup_error_ = nullptr;

// ferry's protocol is its own: an earlier ferryd's routes go from every table, also from one the
// config no longer names.
TEST_F(AnnouncerTest, ConstructionClearsStaleRoutesOfEveryTable) {
  ASSERT_EQ(kernel_->change(RouteChange::add, ip("10.9.9.9"), 100), 0);
  ASSERT_EQ(kernel_->change(RouteChange::add, ip("2001:db8::99"), 100), 0);
  ASSERT_EQ(kernel_->change(RouteChange::add, ip("10.9.9.8"), 200), 0);
  EXPECT_EQ(in(100), (std::set<std::string>{"10.9.9.9", "2001:db8::99"}));
  Announcer announcer(table(100), registry_);
  EXPECT_TRUE(in(std::nullopt).empty());
}

TEST_F(AnnouncerTest, UpdateAddsAnnouncedVipsAndRemovesWithdrawnOnes) {
  Announcer announcer(table(100), registry_);
  announcer.update({planned("10.0.0.10", true), planned("10.0.0.20", false, "web: 0 of 1"),
                    planned("2001:db8::10", true)});
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10", "2001:db8::10"}));
  EXPECT_EQ(sample(registry_, "ferry_announce_vip_announced", {{"vip", "10.0.0.10"}}), 1);
  EXPECT_EQ(sample(registry_, "ferry_announce_vip_announced", {{"vip", "10.0.0.20"}}), 0);
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "add"}}), 2);
  announcer.update(
      {planned("10.0.0.10", false), planned("10.0.0.20", true), planned("2001:db8::10", true)});
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.20", "2001:db8::10"}));
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "add"}}), 3);
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "remove"}}), 1);
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "restore"}}), 0);
  EXPECT_EQ(sample(registry_, "ferry_announce_route_errors_total", {}), 0);
  // The same plan again changes nothing.
  announcer.update(
      {planned("10.0.0.10", false), planned("10.0.0.20", true), planned("2001:db8::10", true)});
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "add"}}), 3);
}

TEST_F(AnnouncerTest, ReportListsEveryVipWithItsReason) {
  Announcer announcer(table(4000), registry_);
  announcer.update({planned("10.0.0.20", false, "web: 0 of 1 backends usable"),
                    planned("10.0.0.10", true, "every service on it can serve (web)")});
  nlohmann::json r = announcer.report();
  EXPECT_EQ(r["table"], 4000);
  EXPECT_EQ(r["protocol"], 70);
  EXPECT_EQ(r["min_backends"], 1);
  EXPECT_EQ(r["withdrawn"], false);
  ASSERT_EQ(r["vips"].size(), 2u);
  const nlohmann::json& a = r["vips"][0];  // by VIP text
  EXPECT_EQ(a["vip"], "10.0.0.10");
  EXPECT_EQ(a["announced"], true);
  EXPECT_EQ(a["services"], nlohmann::json::array({"web"}));
  EXPECT_EQ(a["reason"], "every service on it can serve (web)");
  EXPECT_TRUE(a["error"].is_null());
  std::string since = a["since"];
  EXPECT_EQ(since.size(), 20u) << since;  // 2026-12-01T19:34:31Z
  EXPECT_EQ(since.back(), 'Z');
  EXPECT_EQ(r["vips"][1]["vip"], "10.0.0.20");
  EXPECT_EQ(r["vips"][1]["announced"], false);
  EXPECT_EQ(r["vips"][1]["reason"], "web: 0 of 1 backends usable");
  EXPECT_EQ(in(4000), (std::set<std::string>{"10.0.0.10"}));
}

TEST_F(AnnouncerTest, ReconcileRestoresARouteRemovedBehindItsBackOnce) {
  Announcer announcer(table(100), registry_);
  announcer.update({planned("10.0.0.10", true), planned("10.0.0.20", true)});
  announcer.reconcile();  // both there: nothing to do
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "restore"}}), 0);
  ASSERT_EQ(kernel_->change(RouteChange::remove, ip("10.0.0.20"), 100), 0);
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10"}));
  announcer.reconcile();
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10", "10.0.0.20"}));
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "restore"}}), 1);
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "add"}}), 2);
  announcer.reconcile();
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "restore"}}), 1);
  EXPECT_EQ(sample(registry_, "ferry_announce_route_errors_total", {}), 0);
}

// IPv6 refuses a route through a loopback that is down (ENETDOWN) and drops ours when it goes
// down: a refusal the announcer retries, reports and counts.
TEST_F(AnnouncerTest, ARefusedAddIsReportedCountedAndRetriedByReconcile) {
  Announcer announcer(table(100), registry_);
  ASSERT_EQ(set_loopback_up(false), "");
  announcer.update({planned("2001:db8::10", true), planned("10.0.0.10", true)});
  nlohmann::json vip = announcer.report()["vips"][1];
  ASSERT_EQ(vip["vip"], "2001:db8::10");
  EXPECT_EQ(vip["announced"], false);
  EXPECT_EQ(vip["error"], "adding the route to table 100: Network is down");
  EXPECT_EQ(sample(registry_, "ferry_announce_route_errors_total", {}), 1);
  announcer.reconcile();  // still down: refused again
  EXPECT_EQ(sample(registry_, "ferry_announce_route_errors_total", {}), 2);
  ASSERT_EQ(set_loopback_up(true), "");
  announcer.reconcile();
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10", "2001:db8::10"}));
  vip = announcer.report()["vips"][1];
  EXPECT_EQ(vip["announced"], true);
  EXPECT_TRUE(vip["error"].is_null()) << vip;
  EXPECT_EQ(sample(registry_, "ferry_announce_vip_announced", {{"vip", "2001:db8::10"}}), 1);
}

TEST_F(AnnouncerTest, AFailedCheckOfAnAnnouncedRouteIsClearedOnceTheRouteIsBack) {
  Announcer announcer(table(100), registry_);
  announcer.update({planned("2001:db8::10", true)});
  ASSERT_EQ(in(100), (std::set<std::string>{"2001:db8::10"}));
  ASSERT_EQ(set_loopback_up(false), "");  // the kernel drops the IPv6 route through lo
  EXPECT_TRUE(in(100).empty());
  announcer.reconcile();  // re-adding it is refused while lo is down
  EXPECT_EQ(announcer.report()["vips"][0]["error"],
            "adding back the route to table 100: Network is down");
  EXPECT_EQ(announcer.report()["vips"][0]["announced"], false);
  EXPECT_EQ(sample(registry_, "ferry_announce_vip_announced", {{"vip", "2001:db8::10"}}), 0);
  EXPECT_EQ(sample(registry_, "ferry_announce_route_errors_total", {}), 1);
  ASSERT_EQ(set_loopback_up(true), "");
  announcer.reconcile();
  EXPECT_EQ(in(100), (std::set<std::string>{"2001:db8::10"}));
  EXPECT_EQ(sample(registry_, "ferry_announce_route_changes_total", {{"change", "restore"}}), 1);
  // In line again: status must not go on showing the old refusal.
  EXPECT_TRUE(announcer.report()["vips"][0]["error"].is_null()) << announcer.report().dump();
  EXPECT_EQ(announcer.report()["vips"][0]["announced"], true);
  EXPECT_EQ(sample(registry_, "ferry_announce_vip_announced", {{"vip", "2001:db8::10"}}), 1);
}

TEST_F(AnnouncerTest, ReconcileLeavesAWithdrawnVipAlone) {
  Announcer announcer(table(100), registry_);
  announcer.update({planned("10.0.0.10", false)});
  announcer.reconcile();
  EXPECT_TRUE(in(100).empty());
}

TEST_F(AnnouncerTest, ANewTableGetsTheRoutesAndTheOldOneLosesThemOnTheNextUpdate) {
  Announcer announcer(table(100), registry_);
  announcer.update({planned("10.0.0.10", true), planned("10.0.0.20", false)});
  announcer.configure(table(300));
  EXPECT_EQ(announcer.config().table, 300u);
  announcer.update({planned("10.0.0.10", true), planned("10.0.0.20", false)});
  EXPECT_TRUE(in(100).empty());
  EXPECT_EQ(in(300), (std::set<std::string>{"10.0.0.10"}));
  EXPECT_EQ(announcer.report()["table"], 300);
}

TEST_F(AnnouncerTest, AVipNoLongerPlannedIsRemovedAndForgotten) {
  Announcer announcer(table(100), registry_);
  announcer.update({planned("10.0.0.10", true), planned("10.0.0.20", true)});
  announcer.update({planned("10.0.0.10", true)});
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10"}));
  nlohmann::json r = announcer.report();
  ASSERT_EQ(r["vips"].size(), 1u);
  EXPECT_EQ(r["vips"][0]["vip"], "10.0.0.10");
  EXPECT_FALSE(sample(registry_, "ferry_announce_vip_announced", {{"vip", "10.0.0.20"}}));
}

TEST_F(AnnouncerTest, WithdrawAllRemovesEveryRouteAndStaysWithdrawn) {
  Announcer announcer(table(100), registry_);
  announcer.update(
      {planned("10.0.0.10", true), planned("10.0.0.20", true), planned("10.0.0.30", false)});
  EXPECT_EQ(announcer.withdraw_all("ferryd is stopping"), 2u);
  EXPECT_TRUE(in(100).empty());
  announcer.update({planned("10.0.0.10", true)});
  announcer.reconcile();
  EXPECT_TRUE(in(100).empty());
  nlohmann::json r = announcer.report();
  EXPECT_EQ(r["withdrawn"], true);
  EXPECT_EQ(r["vips"][0]["announced"], false);
  EXPECT_EQ(announcer.withdraw_all("again"), 0u);
}

TEST_F(AnnouncerTest, DestructionWithdrawsWhatItAnnounced) {
  {
    Announcer announcer(table(100), registry_);
    ASSERT_EQ(kernel_->change(RouteChange::add, ip("10.9.9.8"), 200), 0);  // not one of its own
    announcer.update({planned("10.0.0.10", true), planned("2001:db8::10", true)});
    EXPECT_EQ(in(100).size(), 2u);
  }
  EXPECT_TRUE(in(100).empty());
  EXPECT_EQ(in(200), (std::set<std::string>{"10.9.9.8"}));
  // Its collector went with it.
  EXPECT_FALSE(sample(registry_, "ferry_announce_route_changes_total", {{"change", "add"}}));
}

TEST_F(AnnouncerTest, NonRoutableVipsAreNotInTheMetrics) {
  Announcer announcer(table(100), registry_);
  announcer.update({planned("127.0.0.1", false), planned("10.0.0.10", true)});
  EXPECT_FALSE(sample(registry_, "ferry_announce_vip_announced", {{"vip", "127.0.0.1"}}));
  EXPECT_EQ(sample(registry_, "ferry_announce_vip_announced", {{"vip", "10.0.0.10"}}), 1);
}

TEST_F(AnnouncerTest, HostRoutesEnsureIsExclusiveAndRemovingAnAbsentRouteIsNoError) {
  ASSERT_EQ(kernel_->change(RouteChange::ensure, ip("10.0.0.10"), 100), 0);
  EXPECT_EQ(kernel_->change(RouteChange::ensure, ip("10.0.0.10"), 100), EEXIST);
  EXPECT_EQ(kernel_->change(RouteChange::add, ip("10.0.0.10"), 100), 0);  // replace
  EXPECT_EQ(kernel_->change(RouteChange::remove, ip("10.0.0.10"), 100), 0);
  EXPECT_EQ(kernel_->change(RouteChange::remove, ip("10.0.0.10"), 100), 0);
  ASSERT_EQ(kernel_->change(RouteChange::ensure, ip("2001:db8::10"), 100), 0);
  EXPECT_EQ(kernel_->change(RouteChange::ensure, ip("2001:db8::10"), 100), EEXIST);
  EXPECT_EQ(kernel_->change(RouteChange::add, ip("2001:db8::10"), 100), 0);
  EXPECT_EQ(in(100), (std::set<std::string>{"2001:db8::10"}));
  EXPECT_EQ(kernel_->change(RouteChange::remove, ip("2001:db8::10"), 100), 0);
  EXPECT_EQ(kernel_->change(RouteChange::remove, ip("2001:db8::10"), 100), 0);
  ASSERT_EQ(kernel_->change(RouteChange::add, ip("10.0.0.1"), 100), 0);
  ASSERT_EQ(kernel_->change(RouteChange::add, ip("10.0.0.2"), 70000), 0);
  auto listed = kernel_->list_with_tables(std::nullopt);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(kernel_->clear(std::nullopt), 2u);
  EXPECT_TRUE(in(std::nullopt).empty());
}

config::AnnounceConfig settling(std::uint32_t settle_ms) {
  config::AnnounceConfig c = table(100);
  c.settle_ms = settle_ms;
  return c;
}

VipPlan with_usable(const char* vip, std::vector<std::string> usable) {
  VipPlan p = planned(vip, true);
  p.usable = std::move(usable);
  return p;
}

// Awaits the announcer's own due time (what the daemon's settle timer does), then updates.
void update_when_due(Announcer& announcer, const VipPlan& plan) {
  auto due = announcer.next_settled();
  ASSERT_TRUE(due);
  std::this_thread::sleep_until(*due);
  announcer.update({plan});
}

TEST_F(AnnouncerTest, AVipIsAnnouncedOnceItsUsableBackendsHaveHeldStill) {
  Announcer announcer(settling(60), registry_);
  announcer.update({with_usable("10.0.0.10", {"web 10.0.1.2:80"})});
  EXPECT_TRUE(in(100).empty());
  EXPECT_EQ(announcer.report()["vips"][0]["reason"],
            "can serve; announced once its backends' health has held still for 60 ms");
  // A second backend comes up: the wait starts over from here.
  auto changed = std::chrono::steady_clock::now();
  announcer.update({with_usable("10.0.0.10", {"web 10.0.1.2:80", "web 10.0.1.3:80"})});
  ASSERT_TRUE(announcer.next_settled());
  EXPECT_GE(*announcer.next_settled(), changed + std::chrono::milliseconds(60));
  update_when_due(announcer, with_usable("10.0.0.10", {"web 10.0.1.2:80", "web 10.0.1.3:80"}));
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10"}));
  EXPECT_FALSE(announcer.next_settled());
  // Once in, changes of the view do not take it out (the plan does, when it falls short).
  announcer.update({with_usable("10.0.0.10", {"web 10.0.1.2:80"})});
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10"}));
}

TEST_F(AnnouncerTest, AFlappingBackendDelaysTheAnnouncementAtMostFourSettles) {
  Announcer announcer(settling(30), registry_);
  auto start = std::chrono::steady_clock::now();
  announcer.update({with_usable("10.0.0.10", {"web a"})});
  // The view changes before every settle could end, until the cap is reached.
  std::this_thread::sleep_until(start + Announcer::kSettleCap * std::chrono::milliseconds(30));
  announcer.update({with_usable("10.0.0.10", {"web a", "web b"})});
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10"}));
}

TEST_F(AnnouncerTest, BeforeAnnouncingIsToldOncePerAnnouncementEvenWhileTheAddIsRefused) {
  Announcer announcer(table(100), registry_);
  std::vector<std::string> told;
  announcer.set_before_announcing([&](const std::vector<net::IpAddress>& vips) {
    for (const auto& v : vips) told.push_back(v.to_string() + (in(100).empty() ? " before" : ""));
  });
  ASSERT_EQ(set_loopback_up(false), "");  // IPv6 routes through lo are refused
  announcer.update({planned("2001:db8::10", true)});
  announcer.update({planned("2001:db8::10", true)});
  announcer.reconcile();
  EXPECT_EQ(told, (std::vector<std::string>{"2001:db8::10 before"}));
  ASSERT_EQ(set_loopback_up(true), "");
  announcer.reconcile();
  EXPECT_EQ(in(100), (std::set<std::string>{"2001:db8::10"}));
  EXPECT_EQ(told.size(), 1u);
  announcer.update({planned("2001:db8::10", false)});
  announcer.update({planned("2001:db8::10", true)});  // announced again: told again
  EXPECT_EQ(told, (std::vector<std::string>{"2001:db8::10 before", "2001:db8::10 before"}));
}

TEST_F(AnnouncerTest, ARouteRestoredByReconcileIsToldAfterwards) {
  Announcer announcer(table(100), registry_);
  std::vector<std::string> told;
  announcer.set_before_announcing([&](const std::vector<net::IpAddress>& vips) {
    for (const auto& v : vips) told.push_back(v.to_string());
  });
  announcer.update({planned("10.0.0.10", true)});
  ASSERT_EQ(told.size(), 1u);
  ASSERT_EQ(kernel_->change(RouteChange::remove, ip("10.0.0.10"), 100), 0);
  announcer.reconcile();
  EXPECT_EQ(in(100), (std::set<std::string>{"10.0.0.10"}));
  EXPECT_EQ(told, (std::vector<std::string>{"10.0.0.10", "10.0.0.10"}));
  announcer.reconcile();  // there: nothing to tell
  EXPECT_EQ(told.size(), 2u);
}

}  // namespace
}  // namespace ferry::announce
