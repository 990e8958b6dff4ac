// The announce rule: a VIP is announced while every service on it has announce.min_backends
// usable backends (weight > 0, up, and past a first passing check where checks run); echo and
// reflect need none; loopback, unspecified and link-local VIPs are listed but never announced;
// the reason names the failing service and what its backends lack.
#include "lib/announce/announce_plan.hh"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/announce/addresses.hh"

namespace ferry::announce {
namespace {

// A service built by hand: `backends` as "ADDRESS:PORT", weights default to 1.
config::ServiceConfig service(const std::string& name, const char* vip, std::uint16_t port,
                              std::vector<std::string> backends, bool checked = false,
                              config::ServiceMode mode = config::ServiceMode::proxy) {
  config::ServiceConfig s;
  s.name = name;
  s.vip = ip(vip);
  s.port = port;
  s.mode = mode;
  for (const auto& b : backends) {
    auto e = net::Endpoint::parse(b);
    EXPECT_TRUE(e) << b;
    s.backends.push_back(e.value_or(net::Endpoint{}));
    s.backend_weights.push_back(1);
  }
  if (checked) s.health = config::HealthCheckConfig{};
  return s;
}

config::Config config_of(std::vector<config::ServiceConfig> services) {
  config::Config c;
  c.services = std::move(services);
  return c;
}

// The health board as the plan sees it: every backend up and passed unless set otherwise.
struct FakeHealth {
  std::map<std::pair<std::string, std::string>, BackendHealth> states;
  std::vector<std::pair<std::string, std::string>> asked;

  void set(const std::string& service, const std::string& backend, bool up, bool passed) {
    BackendHealth h;
    h.up = up;
    h.passed = passed;
    states[{service, backend}] = h;
  }
  HealthLookup lookup() {
    return [this](const std::string& service, const net::Endpoint& backend) {
      asked.emplace_back(service, backend.to_string());
      auto it = states.find({service, backend.to_string()});
      if (it != states.end()) return it->second;
      BackendHealth healthy;
      healthy.up = true;
      healthy.passed = true;
      return healthy;
    };
  }
};

std::vector<VipPlan> plan(const config::Config& c, std::uint32_t min_backends, FakeHealth& h) {
  return plan_announcements(c, min_backends, h.lookup());
}

TEST(AnnouncePlan, EmptyConfigPlansNothing) {
  FakeHealth h;
  EXPECT_TRUE(plan(config::Config{}, 1, h).empty());
}

TEST(AnnouncePlan, VipWhoseServicesAllServeIsAnnouncedNamingThem) {
  FakeHealth h;
  auto p = plan(config_of({service("web", "10.0.0.10", 80, {"10.0.1.2:80"}),
                           service("dns", "10.0.0.10", 53, {"10.0.1.3:53"})}),
                1, h);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].vip, ip("10.0.0.10"));
  EXPECT_TRUE(p[0].announce);
  EXPECT_EQ(p[0].services, (std::vector<std::string>{"web", "dns"}));
  EXPECT_EQ(p[0].reason, "every service on it can serve (web, dns)");
}

TEST(AnnouncePlan, OneEntryPerDistinctVipInConfigOrder) {
  FakeHealth h;
  auto p = plan(config_of({service("b", "10.0.0.20", 80, {"10.0.1.2:80"}),
                           service("a", "10.0.0.10", 80, {"10.0.1.2:80"}),
                           service("c", "10.0.0.20", 81, {"10.0.1.2:81"}),
                           service("v6", "2001:db8::10", 80, {"[2001:db8::2]:80"})}),
                1, h);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].vip, ip("10.0.0.20"));
  EXPECT_EQ(p[0].services, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(p[1].vip, ip("10.0.0.10"));
  EXPECT_EQ(p[1].services, (std::vector<std::string>{"a"}));
  EXPECT_EQ(p[2].vip, ip("2001:db8::10"));
  EXPECT_TRUE(p[2].announce);
}

TEST(AnnouncePlan, VipWithTwoServicesWithdrawnWhenEitherLacksBackends) {
  // One VIP, a UDP and a TCP service on it (each protocol its own service): the weakest decides.
  auto udp = service("dns-udp", "10.0.0.10", 53, {"10.0.1.2:53"});
  auto tcp = service("dns-tcp", "10.0.0.10", 53, {"10.0.1.3:53"});
  tcp.protocols = {.udp = false, .tcp = true};
  for (const char* failing : {"dns-udp", "dns-tcp"}) {
    FakeHealth h;
    h.set(failing, failing == std::string("dns-udp") ? "10.0.1.2:53" : "10.0.1.3:53", false, true);
    auto p = plan(config_of({udp, tcp}), 1, h);
    ASSERT_EQ(p.size(), 1u) << failing;
    EXPECT_FALSE(p[0].announce) << failing;
    EXPECT_EQ(p[0].services, (std::vector<std::string>{"dns-udp", "dns-tcp"}));
    EXPECT_EQ(p[0].reason, std::string(failing) + ": 0 of 1 backends usable, 1 needed (1 down)");
  }
}

TEST(AnnouncePlan, ReasonsOfEveryFailingServiceAreJoined) {
  FakeHealth h;
  h.set("a", "10.0.1.2:80", false, true);
  h.set("c", "10.0.1.4:80", false, true);
  auto p = plan(config_of({service("a", "10.0.0.10", 80, {"10.0.1.2:80"}),
                           service("b", "10.0.0.10", 81, {"10.0.1.3:80"}),
                           service("c", "10.0.0.10", 82, {"10.0.1.4:80"})}),
                1, h);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason,
            "a: 0 of 1 backends usable, 1 needed (1 down); "
            "c: 0 of 1 backends usable, 1 needed (1 down)");
}

TEST(AnnouncePlan, FailingServiceWithdrawsOnlyItsOwnVip) {
  FakeHealth h;
  h.set("a", "10.0.1.2:80", false, true);
  auto p = plan(config_of({service("a", "10.0.0.10", 80, {"10.0.1.2:80"}),
                           service("b", "10.0.0.20", 80, {"10.0.1.2:80"})}),
                1, h);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_FALSE(p[0].announce);
  EXPECT_TRUE(p[1].announce);
  EXPECT_EQ(p[1].reason, "every service on it can serve (b)");
}

TEST(AnnouncePlan, MinBackendsCountsUsableBackends) {
  FakeHealth h;
  h.set("web", "10.0.1.4:80", false, true);
  auto c =
      config_of({service("web", "10.0.0.10", 80, {"10.0.1.2:80", "10.0.1.3:80", "10.0.1.4:80"})});
  EXPECT_TRUE(plan(c, 1, h)[0].announce);
  EXPECT_TRUE(plan(c, 2, h)[0].announce);
  auto p = plan(c, 3, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason, "web: 2 of 3 backends usable, 3 needed (1 down)");
}

TEST(AnnouncePlan, DrainedBackendsWeighNothing) {
  FakeHealth h;
  auto s = service("web", "10.0.0.10", 80, {"10.0.1.2:80", "10.0.1.3:80"});
  s.backend_weights = {0, 5};
  EXPECT_TRUE(plan(config_of({s}), 1, h)[0].announce);
  s.backend_weights = {0, 0};
  auto p = plan(config_of({s}), 1, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason, "web: 0 of 2 backends usable, 1 needed (2 drained, disabled or weight 0)");
}

TEST(AnnouncePlan, WeightZeroIsCountedAsDrainedEvenWhenDown) {
  FakeHealth h;
  h.set("web", "10.0.1.2:80", false, false);
  auto s = service("web", "10.0.0.10", 80, {"10.0.1.2:80"}, true);
  s.backend_weights = {0};
  EXPECT_EQ(plan(config_of({s}), 1, h)[0].reason,
            "web: 0 of 1 backends usable, 1 needed (1 drained, disabled or weight 0)");
}

TEST(AnnouncePlan, DownBackendIsNotUsable) {
  FakeHealth h;
  h.set("web", "10.0.1.2:80", false, true);
  auto p = plan(config_of({service("web", "10.0.0.10", 80, {"10.0.1.2:80"}, true)}), 1, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason, "web: 0 of 1 backends usable, 1 needed (1 down)");
}

TEST(AnnouncePlan, CheckedBackendCountsOnlyAfterAFirstPassingCheck) {
  FakeHealth h;
  h.set("web", "10.0.1.2:80", true, false);  // up (the initial state), never passed yet
  auto checked = config_of({service("web", "10.0.0.10", 80, {"10.0.1.2:80"}, true)});
  auto p = plan(checked, 1, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason, "web: 0 of 1 backends usable, 1 needed (1 without a passing check yet)");
  h.set("web", "10.0.1.2:80", true, true);
  EXPECT_TRUE(plan(checked, 1, h)[0].announce);
}

TEST(AnnouncePlan, UncheckedBackendNeedsNoPassingCheck) {
  FakeHealth h;
  h.set("web", "10.0.1.2:80", true, false);  // nothing checks it, so nothing ever passes
  auto p = plan(config_of({service("web", "10.0.0.10", 80, {"10.0.1.2:80"}, false)}), 1, h);
  EXPECT_TRUE(p[0].announce);
  EXPECT_EQ(p[0].reason, "every service on it can serve (web)");
}

TEST(AnnouncePlan, ReasonCountsEachShortfallOnceInOrder) {
  FakeHealth h;
  h.set("web", "10.0.1.3:80", false, true);
  h.set("web", "10.0.1.4:80", true, false);
  auto s = service("web", "10.0.0.10", 80,
                   {"10.0.1.2:80", "10.0.1.3:80", "10.0.1.4:80", "10.0.1.5:80"}, true);
  s.backend_weights = {1, 1, 1, 0};
  auto p = plan(config_of({s}), 2, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason,
            "web: 1 of 4 backends usable, 2 needed (1 down, 1 drained, disabled or weight 0, 1 "
            "without a passing check yet)");
}

TEST(AnnouncePlan, ServiceWithoutBackendsStatesNoDetail) {
  FakeHealth h;
  auto p = plan(config_of({service("web", "10.0.0.10", 80, {})}), 1, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason, "web: 0 of 0 backends usable, 1 needed");
}

TEST(AnnouncePlan, EchoAndReflectServicesNeedNoBackends) {
  FakeHealth h;
  auto echo = service("echo", "10.0.0.10", 7, {}, false, config::ServiceMode::echo);
  auto reflect = service("reflect", "10.0.0.10", 9, {}, false, config::ServiceMode::reflect);
  auto p = plan(config_of({echo, reflect}), 3, h);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_TRUE(p[0].announce);
  EXPECT_EQ(p[0].reason, "every service on it can serve (echo, reflect)");
  EXPECT_TRUE(h.asked.empty());
}

TEST(AnnouncePlan, EchoOnAVipDoesNotCoverAProxyServiceThatCannotServe) {
  FakeHealth h;
  h.set("web", "10.0.1.2:80", false, true);
  auto p = plan(config_of({service("echo", "10.0.0.10", 7, {}, false, config::ServiceMode::echo),
                           service("web", "10.0.0.10", 80, {"10.0.1.2:80"})}),
                1, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason, "web: 0 of 1 backends usable, 1 needed (1 down)");
}

TEST(AnnouncePlan, LoopbackUnspecifiedAndLinkLocalVipsAreListedButNeverAnnounced) {
  for (const char* vip :
       {"127.0.0.1", "127.1.2.3", "0.0.0.0", "169.254.10.1", "::1", "::", "fe80::1", "febf::1"}) {
    FakeHealth h;
    auto p = plan(config_of({service("echo", vip, 7, {}, false, config::ServiceMode::echo),
                             service("web", vip, 80, {"10.0.1.2:80"})}),
                  1, h);
    ASSERT_EQ(p.size(), 1u) << vip;
    EXPECT_FALSE(p[0].announce) << vip;
    EXPECT_EQ(p[0].services, (std::vector<std::string>{"echo", "web"})) << vip;
    EXPECT_EQ(p[0].reason,
              "a loopback, unspecified, link-local or multicast address is never announced")
        << vip;
  }
}

TEST(AnnouncePlan, NonRoutableVipKeepsItsReasonWhenItsServicesFail) {
  FakeHealth h;
  h.set("web", "10.0.1.2:80", false, false);
  auto p = plan(config_of({service("web", "127.0.0.1", 80, {"10.0.1.2:80"})}), 1, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason,
            "a loopback, unspecified, link-local or multicast address is never announced");
}

TEST(AnnouncePlan, AsksTheHealthOfEachBackendUnderItsOwnService) {
  FakeHealth h;
  plan(config_of({service("a", "10.0.0.10", 80, {"10.0.1.2:80", "10.0.1.3:80"}),
                  service("b", "10.0.0.20", 80, {"10.0.1.2:80"})}),
       1, h);
  std::set<std::pair<std::string, std::string>> asked(h.asked.begin(), h.asked.end());
  EXPECT_EQ(asked, (std::set<std::pair<std::string, std::string>>{
                       {"a", "10.0.1.2:80"}, {"a", "10.0.1.3:80"}, {"b", "10.0.1.2:80"}}));
}

TEST(AnnouncePlan, Ipv6VipFollowsTheSameRule) {
  FakeHealth h;
  h.set("web6", "[2001:db8::3]:80", true, false);
  auto c = config_of(
      {service("web6", "2001:db8::10", 80, {"[2001:db8::2]:80", "[2001:db8::3]:80"}, true)});
  EXPECT_TRUE(plan(c, 1, h)[0].announce);
  auto p = plan(c, 2, h);
  EXPECT_FALSE(p[0].announce);
  EXPECT_EQ(p[0].reason, "web6: 1 of 2 backends usable, 2 needed (1 without a passing check yet)");
}

TEST(AnnounceRoutable, OnlyAddressesARouterCanUse) {
  for (const char* yes : {"10.0.0.1", "192.0.2.1", "1.0.0.0", "126.255.255.255", "128.0.0.1",
                          "169.253.0.1", "169.255.0.1", "223.255.255.254", "2001:db8::1", "::2",
                          "fec0::1", "fe00::1", "feff::1", "::fffe:10.0.0.1"}) {
    EXPECT_TRUE(routable(ip(yes))) << yes;
  }
  for (const char* no :
       {"0.0.0.0", "127.0.0.1", "127.255.255.254", "169.254.0.1", "169.254.255.255", "::", "::1",
        "fe80::1", "fe80::abcd:1", "febf:ffff::1", "224.0.0.5", "239.1.2.3", "240.0.0.1",
        "255.255.255.255", "ff02::1", "ff0e::10", "::ffff:127.0.0.1", "::ffff:10.0.0.1"}) {
    EXPECT_FALSE(routable(ip(no))) << no;
  }
}

TEST(AnnouncePlan, AServiceThisHostCannotServeKeepsItsVipOutWhateverItsBackends) {
  FakeHealth h;
  auto c = config_of({service("web", "10.0.0.10", 80, {"10.0.1.2:80"}),
                      service("echo", "10.0.0.20", 7, {}, false, config::ServiceMode::echo)});
  auto p = plan_announcements(c, 1, h.lookup(), [](const config::ServiceConfig& s) {
    return s.name == "echo" ? std::string("not listening on 10.0.0.20:7 (see the log)")
                            : std::string();
  });
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(p[0].announce);
  EXPECT_FALSE(p[1].announce);
  EXPECT_EQ(p[1].reason, "echo: not listening on 10.0.0.20:7 (see the log)");
}

// Health checks added by a reload to the services of an announced VIP: their backends have not
// passed yet, which holds back a VIP not announced but does not withdraw one that is.
TEST(AnnouncePlan, BackendsWithoutAPassingCheckYetKeepAnAnnouncedVip) {
  FakeHealth h;
  h.set("web", "10.0.1.2:80", true, false);
  auto c = config_of({service("web", "10.0.0.10", 80, {"10.0.1.2:80"}, true),
                      service("api", "10.0.0.20", 80, {"10.0.1.2:80"}, true)});
  h.set("api", "10.0.1.2:80", true, false);
  auto announced = [](const net::IpAddress& vip) { return vip == ip("10.0.0.10"); };
  auto p = plan_announcements(c, 1, h.lookup(), {}, announced);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(p[0].announce) << p[0].reason;
  EXPECT_EQ(p[0].usable, (std::vector<std::string>{"web 10.0.1.2:80"}));
  EXPECT_FALSE(p[1].announce);
  EXPECT_EQ(p[1].reason, "api: 0 of 1 backends usable, 1 needed (1 without a passing check yet)");
  // Down is down, announced or not.
  h.set("web", "10.0.1.2:80", false, false);
  EXPECT_FALSE(plan_announcements(c, 1, h.lookup(), {}, announced)[0].announce);
}

TEST(AnnouncePlan, TheLongestCheckIntervalOfAVipsServicesIsItsSettleBase) {
  FakeHealth h;
  auto a = service("a", "10.0.0.10", 80, {"10.0.1.2:80"}, true);
  auto b = service("b", "10.0.0.10", 81, {"10.0.1.3:81"}, true);
  a.health->interval_ms = 300;
  b.health->interval_ms = 700;
  auto plain = service("c", "10.0.0.20", 80, {"10.0.1.4:80"});
  auto p = plan(config_of({a, b, plain}), 1, h);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].longest_check_interval_ms, 700u);
  EXPECT_EQ(p[1].longest_check_interval_ms, 0u);
}

}  // namespace
}  // namespace ferry::announce
