// The health-check tunnel map's contents: per mark, the backend's family, the outer header's
// kind, xdp.encap's source of that family and the GUE port in network order.
#include "lib/tunnel_check/tunnel_entries.hh"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <stdexcept>

namespace ferry::tunnel_check {
namespace {

net::IpAddress ip(const char* text) {
  return *net::IpAddress::parse(text);
}

config::EncapConfig encap() {
  config::EncapConfig e;
  e.source = ip("10.51.0.1");
  e.source6 = ip("fd50::1");
  e.gue_port = 6080;
  return e;
}

TEST(TunnelEntries, IpipOverIpv4CarriesTheIpv4SourceAndNoPort) {
  auto t = tunnel_entry({config::Forwarding::ipip, ip("10.50.0.11")}, encap());
  EXPECT_EQ(t.family, static_cast<__u32>(AF_INET));
  EXPECT_EQ(t.kind, bpf::FERRY_HC_IPIP);
  EXPECT_EQ(t.gue_port, 0);
  EXPECT_EQ(std::memcmp(t.source, ip("10.51.0.1").bytes.data(), 4), 0);
  EXPECT_EQ(std::memcmp(t.destination, ip("10.50.0.11").bytes.data(), 4), 0);
  // The rest of the 16 bytes stays zero.
  for (int i = 4; i < 16; ++i) EXPECT_EQ(t.source[i] | t.destination[i], 0) << i;
}

TEST(TunnelEntries, GueOverIpv6CarriesSource6AndThePortInNetworkOrder) {
  auto t = tunnel_entry({config::Forwarding::gue, ip("fd50::12")}, encap());
  EXPECT_EQ(t.family, static_cast<__u32>(AF_INET6));
  EXPECT_EQ(t.kind, bpf::FERRY_HC_GUE);
  EXPECT_EQ(t.gue_port, htons(6080));
  EXPECT_EQ(std::memcmp(t.source, ip("fd50::1").bytes.data(), 16), 0);
  EXPECT_EQ(std::memcmp(t.destination, ip("fd50::12").bytes.data(), 16), 0);
}

TEST(TunnelEntries, ABackendWithoutASourceOfItsFamilyIsRefused) {
  config::EncapConfig e = encap();
  e.source6.reset();
  EXPECT_THROW(tunnel_entry({config::Forwarding::ipip, ip("fd50::12")}, e), std::runtime_error);
}

TEST(TunnelEntries, EveryMarkHasTheEntryOfItsTunnel) {
  health::TunnelMarks marks;
  health::TunnelKey a{config::Forwarding::ipip, ip("10.50.0.11")};
  health::TunnelKey b{config::Forwarding::gue, ip("10.50.0.11")};
  marks.assign({a, b});
  auto entries = tunnel_entries(marks, encap());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries.at(*marks.mark_of(a)).kind, bpf::FERRY_HC_IPIP);
  EXPECT_EQ(entries.at(*marks.mark_of(b)).kind, bpf::FERRY_HC_GUE);
}

}  // namespace
}  // namespace ferry::tunnel_check
