// Address, endpoint and prefix parsing of lib/common/net.
#include "lib/common/net.hh"

#include <gtest/gtest.h>

namespace ferry::net {
namespace {

TEST(Endpoint, ParsesIpv4AndBracketedIpv6) {
  auto v4 = Endpoint::parse("10.0.1.2:53");
  ASSERT_TRUE(v4);
  EXPECT_TRUE(v4->address.is_v4());
  EXPECT_EQ(v4->port, 53);
  EXPECT_EQ(v4->to_string(), "10.0.1.2:53");
  auto v6 = Endpoint::parse("[2001:db8::1]:8080");
  ASSERT_TRUE(v6);
  EXPECT_FALSE(v6->address.is_v4());
  EXPECT_EQ(v6->to_string(), "[2001:db8::1]:8080");
}

TEST(Endpoint, RejectsMissingOrOutOfRangePortsAndBareIpv6) {
  for (const char* bad : {"10.0.0.1", "10.0.0.1:", "10.0.0.1:65536", "10.0.0.1:-1", "10.0.0.1:5x",
                          "2001:db8::1:53", "[10.0.0.1]:53", "[2001:db8::1]", "host:53", ":53"}) {
    EXPECT_FALSE(Endpoint::parse(bad)) << bad;
  }
}

TEST(Endpoint, RoundTripsThroughSockaddr) {
  auto e = *Endpoint::parse("[::1]:9469");
  sockaddr_storage ss;
  socklen_t len = e.to_sockaddr(ss);
  auto back = Endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, e);
}

TEST(Prefix, ParsesAndRejectsHostBits) {
  auto p = Prefix::parse("192.0.2.0/24");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->length, 24);
  EXPECT_TRUE(p->contains(*IpAddress::parse("192.0.2.77")));
  EXPECT_FALSE(p->contains(*IpAddress::parse("192.0.3.1")));
  EXPECT_FALSE(p->contains(*IpAddress::parse("2001:db8::1")));
  std::string why;
  EXPECT_FALSE(Prefix::parse("192.0.2.1/24", &why));
  EXPECT_NE(why.find("host bits"), std::string::npos);
  EXPECT_FALSE(Prefix::parse("192.0.2.0/33", &why));
  EXPECT_FALSE(Prefix::parse("192.0.2.0", &why));
  EXPECT_TRUE(Prefix::parse("2001:db8::/32"));
  EXPECT_TRUE(Prefix::parse("0.0.0.0/0"));
  EXPECT_FALSE(Prefix::parse("2001:db8::/129"));
}

}  // namespace
}  // namespace ferry::net
