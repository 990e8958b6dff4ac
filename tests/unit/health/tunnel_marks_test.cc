// Tunnel marks: which backends get one, the reserved range, stability across reloads, and the
// checks that carry them (the VIP, the mark) versus the ones that do not.
#include "lib/health/tunnel_marks.hh"

#include <gtest/gtest.h>

#include <stdexcept>

#include "lib/health/check.hh"
#include "lib/health/health_checker.hh"

namespace ferry::health {
namespace {

net::IpAddress ip(const char* text) {
  return *net::IpAddress::parse(text);
}
net::Endpoint ep(const char* text) {
  return *net::Endpoint::parse(text);
}

config::ServiceConfig service(const char* name, config::Forwarding forwarding,
                              std::vector<net::Endpoint> backends, bool checked = true) {
  config::ServiceConfig s;
  s.name = name;
  s.vip = ip("192.0.2.10");
  s.port = 80;
  s.forwarding = forwarding;
  s.backends = std::move(backends);
  if (checked) s.health = config::HealthCheckConfig{};
  return s;
}

TEST(TunnelMarks, KeysAreTheBackendsOfCheckedEncapsulatingServicesPerForwarding) {
  std::vector<config::ServiceConfig> services{
      service("web", config::Forwarding::ipip, {ep("10.0.0.1:80"), ep("10.0.0.2:80")}),
      // The same address behind gue is another tunnel; behind ipip again, the same one.
      service("web2", config::Forwarding::gue, {ep("10.0.0.1:80")}),
      service("web3", config::Forwarding::ipip, {ep("10.0.0.1:443")}),
      service("nat", config::Forwarding::nat, {ep("10.0.0.9:80")}),
      service("unchecked", config::Forwarding::ipip, {ep("10.0.0.8:80")}, false),
  };
  auto keys = tunnel_keys(services);
  std::set<TunnelKey> want{{config::Forwarding::ipip, ip("10.0.0.1")},
                           {config::Forwarding::ipip, ip("10.0.0.2")},
                           {config::Forwarding::gue, ip("10.0.0.1")}};
  EXPECT_EQ(keys, want);
}

TEST(TunnelMarks, MarksAreInTheReservedRangeAndDistinct) {
  TunnelMarks marks;
  marks.assign({{config::Forwarding::ipip, ip("10.0.0.1")},
                {config::Forwarding::gue, ip("10.0.0.1")},
                {config::Forwarding::ipip, ip("fd00::1")}});
  std::set<std::uint32_t> seen;
  for (const auto& [key, mark] : marks.marks()) {
    EXPECT_TRUE(is_tunnel_mark(mark)) << std::hex << mark;
    EXPECT_EQ(mark & kTunnelMarkMask, 0x66650000u);
    seen.insert(mark);
  }
  EXPECT_EQ(seen, (std::set<std::uint32_t>{0x66650001u, 0x66650002u, 0x66650003u}));
  EXPECT_FALSE(is_tunnel_mark(0x66650000u));  // the base itself names nothing
  EXPECT_FALSE(is_tunnel_mark(0x00000001u));
}

TEST(TunnelMarks, AKeptTunnelKeepsItsMarkAndANewOneTakesTheLowestFree) {
  TunnelKey a{config::Forwarding::ipip, ip("10.0.0.1")};
  TunnelKey b{config::Forwarding::ipip, ip("10.0.0.2")};
  TunnelKey c{config::Forwarding::ipip, ip("10.0.0.3")};
  TunnelKey d{config::Forwarding::gue, ip("10.0.0.0")};  // sorts first
  TunnelMarks marks;
  marks.assign({a, b, c});
  auto mark_b = *marks.mark_of(b);
  auto mark_c = *marks.mark_of(c);
  auto mark_a = *marks.mark_of(a);
  marks.assign({b, c, d});
  EXPECT_EQ(marks.mark_of(b), mark_b);
  EXPECT_EQ(marks.mark_of(c), mark_c);
  EXPECT_EQ(marks.mark_of(d), mark_a);  // a's, freed
  EXPECT_FALSE(marks.mark_of(a));
  EXPECT_EQ(marks.marks().size(), 3u);
}

TEST(TunnelMarks, MoreTunnelsThanTheRangeHoldsAreRefusedAndNothingChanges) {
  std::set<TunnelKey> keys;
  for (std::uint32_t i = 0; i <= kMaxTunnels; ++i) {
    net::IpAddress a = ip("10.0.0.0");
    a.bytes[2] = static_cast<std::uint8_t>(i >> 8);
    a.bytes[3] = static_cast<std::uint8_t>(i);
    keys.insert({config::Forwarding::ipip, a});
  }
  TunnelMarks marks;
  marks.assign({{config::Forwarding::gue, ip("10.9.9.9")}});
  EXPECT_THROW(marks.assign(keys), std::runtime_error);
  EXPECT_EQ(marks.marks().size(), 1u);
}

TEST(TunnelChecks, AnEncapsulatingServicesCheckGoesToTheVipWithItsBackendsMark) {
  std::vector<config::ServiceConfig> services{
      service("web", config::Forwarding::gue, {ep("10.0.0.1:80"), ep("10.0.0.2:80")}),
      service("nat", config::Forwarding::nat, {ep("10.0.0.9:80")}),
  };
  services[0].health->port = 8080;
  TunnelMarks marks;
  marks.assign(tunnel_keys(services));
  auto targets = check_targets(services, &marks);
  ASSERT_EQ(targets.size(), 3u);
  ASSERT_TRUE(targets[0].tunnel);
  EXPECT_EQ(targets[0].tunnel->mark, *marks.mark_of({config::Forwarding::gue, ip("10.0.0.1")}));
  EXPECT_EQ(targets[0].tunnel->vip, ip("192.0.2.10"));
  EXPECT_FALSE(targets[2].tunnel);  // nat: the backend's own address, as before

  CheckAddress tunneled = check_address(targets[1].params, targets[1].backend, targets[1].tunnel);
  EXPECT_EQ(tunneled.endpoint, ep("192.0.2.10:8080"));  // the VIP, on the check's port
  EXPECT_EQ(tunneled.mark, *marks.mark_of({config::Forwarding::gue, ip("10.0.0.2")}));
  CheckAddress direct = check_address(targets[2].params, targets[2].backend, targets[2].tunnel);
  EXPECT_EQ(direct.endpoint, ep("10.0.0.9:80"));
  EXPECT_EQ(direct.mark, 0u);
  // Without marks (no tunnel program), every check goes to the backend's address.
  EXPECT_FALSE(check_targets(services)[0].tunnel);
}

}  // namespace
}  // namespace ferry::health
