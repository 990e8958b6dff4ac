// The route, balance and reflect actions on real frames: bytes against scapy vectors, checksums
// against full recomputation, and the stateless DNAT round trip.
#include <gtest/gtest.h>

#include "lib/packet/balance.hh"
#include "lib/packet/checksum.hh"
#include "lib/packet/fragment.hh"
#include "lib/packet/reflect.hh"
#include "lib/packet/route.hh"
#include "tests/unit/packet/frame_builder.hh"
#include "tests/unit/packet/vectors.hh"

namespace ferry::packet {
namespace {

using test::addr;
using test::build_frame;
using test::FrameSpec;
using test::stored16;

const NextHop kHop{.egress_port = 3,
                   .src_mac = {0x02, 0, 0, 0, 0x01, 0x01},
                   .dst_mac = {0x02, 0, 0, 0, 0x01, 0x02}};

// The caller's neighbour lookup, as the worker would pass it: here always kHop.
Verdict resolve_to_hop(const ParsedPacket&, NextHop& out) {
  out = kHop;
  return Verdict::forward(kHop.egress_port);
}

ServiceTableOptions maglev_size(std::uint32_t size) {
  ServiceTableOptions o;
  o.maglev_size = size;
  return o;
}

config::ServiceConfig service(std::string name, std::string vip, std::uint16_t port,
                              std::vector<std::string> backends) {
  config::ServiceConfig s;
  s.name = std::move(name);
  s.vip = *net::IpAddress::parse(vip);
  s.port = port;
  for (const auto& b : backends) s.backends.push_back(*net::Endpoint::parse(b));
  return s;
}

void expect_checksums_valid(const std::vector<std::uint8_t>& f, const char* what) {
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none) << what;
  auto want = test::reference_checksums(f, p);
  if (p.is_v4()) {
    EXPECT_EQ(stored16(f, p.l3_offset + 10), want.ipv4_header) << what;
  }
  std::uint16_t stored = stored16(f, p.l4_checksum_offset());
  if (!(p.protocol == IPPROTO_UDP && stored == 0)) {
    EXPECT_EQ(stored, want.l4) << what;
  }
}

TEST(Route, DecrementsTtlFixesChecksumAndSetsMacs) {
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  Verdict v = route(f, p, kHop);
  EXPECT_EQ(v, Verdict::forward(3));
  EXPECT_EQ(f[p.l3_offset + 8], 63);
  EXPECT_EQ(p.hop_limit, 63);
  EXPECT_EQ(stored16(f, p.l3_offset + 10), 0x9d87);  // scapy, see checksum_test.cc
  EXPECT_EQ(std::vector<std::uint8_t>(f.begin(), f.begin() + 12),
            (std::vector<std::uint8_t>{2, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 1}));
  // Everything from the IP header's TTL onward other than TTL and checksum is untouched.
  EXPECT_TRUE(std::equal(f.begin() + 12, f.begin() + 22, test::kUdp4.begin() + 12));
  EXPECT_TRUE(std::equal(f.begin() + 26, f.end(), test::kUdp4.begin() + 26));
  expect_checksums_valid(f, "routed ipv4");
}

TEST(Route, Ipv6HopLimitDecrementNeedsNoChecksum) {
  auto f = test::kUdp6;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  EXPECT_EQ(route(f, p, kHop), Verdict::forward(3));
  EXPECT_EQ(f[p.l3_offset + 7], 63);
  EXPECT_TRUE(std::equal(f.begin() + 12, f.begin() + 21, test::kUdp6.begin() + 12));
  EXPECT_TRUE(std::equal(f.begin() + 22, f.end(), test::kUdp6.begin() + 22));
  expect_checksums_valid(f, "routed ipv6");
}

TEST(Route, TtlOneOrZeroIsDroppedUntouched) {
  for (IpVersion v : {IpVersion::v4, IpVersion::v6}) {
    for (std::uint8_t ttl : {0, 1}) {
      FrameSpec s;
      s.version = v;
      if (v == IpVersion::v6) {
        s.src = addr("2001:db8::1");
        s.dst = addr("2001:db8::2");
      }
      s.hop_limit = ttl;
      auto f = build_frame(s).bytes;
      auto original = f;
      ParsedPacket p;
      ASSERT_EQ(parse_frame(f, p), ParseError::none);
      EXPECT_EQ(route(f, p, kHop), Verdict::dropped(Drop::ttl_expired));
      EXPECT_EQ(f, original);
    }
  }
  FrameSpec s;
  s.hop_limit = 2;  // the last hop that may still be forwarded, arriving with 1
  auto f = build_frame(s).bytes;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  EXPECT_EQ(route(f, p, kHop), Verdict::forward(3));
  EXPECT_EQ(p.hop_limit, 1);
  expect_checksums_valid(f, "ttl 2 -> 1");
}

TEST(Route, ViaResolverReportsTheCallersDropReason) {
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  auto no_route = [](const ParsedPacket&, NextHop&) { return Verdict::dropped(Drop::no_route); };
  EXPECT_EQ(route_via(f, p, no_route), Verdict::dropped(Drop::no_route));
  EXPECT_EQ(f, test::kUdp4);
  EXPECT_EQ(route_via(f, p, resolve_to_hop), Verdict::forward(3));
}

TEST(Route, NeighbourMissRoutesTheFrameButForItsDestinationMacAndHoldsIt) {
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  std::uint8_t ttl = p.hop_limit;
  auto miss = [](const ParsedPacket&, NextHop& out) {
    out = kHop;  // the resolver knows the port and its MAC, not the next hop's
    return Verdict::hold(kHop.egress_port);
  };
  EXPECT_EQ(route_via(f, p, miss), Verdict::hold(3));
  EXPECT_EQ(p.hop_limit, ttl - 1);
  EXPECT_EQ(MacAddress(), (MacAddress{f[0], f[1], f[2], f[3], f[4], f[5]}));
  EXPECT_EQ(kHop.src_mac, (MacAddress{f[6], f[7], f[8], f[9], f[10], f[11]}));
  expect_checksums_valid(f, "held");
}

TEST(Route, RefusesAFrameShorterThanItsParse) {
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  std::vector<std::uint8_t> shorter(f.begin(), f.end() - 1);
  EXPECT_EQ(route(shorter, p, kHop), Verdict::dropped(Drop::malformed));
  EXPECT_EQ(reflect(shorter, p, 0), Verdict::dropped(Drop::malformed));
}

// One backend, so the choice is known and the result can be compared with scapy's bytes.
TEST(Balance, DnatToBackendMatchesScapyVectorIpv4AndIpv6) {
  std::vector<config::ServiceConfig> configs = {
      service("dns", "10.0.0.10", 53, {"10.0.1.2:5353"}),
      service("dns6", "2001:db8:ffff::10", 53, {"[2001:db8:1::2]:5353"})};
  ServiceTable table = build_service_table(configs, maglev_size(251));
  struct Case {
    const std::vector<std::uint8_t>* in;
    const std::vector<std::uint8_t>* want;
  };
  for (Case c :
       {Case{&test::kUdp4, &test::kUdp4ToBackend}, Case{&test::kUdp6, &test::kUdp6ToBackend}}) {
    auto f = *c.in;
    ParsedPacket p;
    ASSERT_EQ(parse_frame(f, p), ParseError::none);
    EXPECT_EQ(balance(f, p, table, resolve_to_hop), Verdict::forward(3));
    EXPECT_EQ(f, *c.want);
    EXPECT_EQ(p.dst_port, 5353);
  }
}

// Client -> VIP is rewritten to the backend; the backend answers (swap), the reply is rewritten
// back: the client sees exactly the reverse of the tuple it sent, with valid checksums.
TEST(Balance, RequestAndReplyRoundTripRestoresTheClientsView) {
  std::vector<config::ServiceConfig> configs = {
      service("dns", "10.0.0.10", 53, {"10.0.1.2:53", "10.0.1.3:53", "10.0.1.4:5353"}),
      service("dns6", "2001:db8::10", 53, {"[2001:db8:1::2]:53", "[2001:db8:1::3]:5300"})};
  ServiceTable table = build_service_table(configs, maglev_size(1031));
  int round = 0;
  for (IpVersion v : {IpVersion::v4, IpVersion::v6}) {
    for (std::uint16_t client_port = 1000; client_port < 1100; ++client_port, ++round) {
      FrameSpec s;
      s.version = v;
      s.src = addr(v == IpVersion::v4 ? "192.0.2.77" : "2001:db8:c::77");
      s.dst = addr(v == IpVersion::v4 ? "10.0.0.10" : "2001:db8::10");
      s.src_port = client_port;
      s.dst_port = 53;
      s.payload = {static_cast<std::uint8_t>(round), 'q', 'r', 'y', '?'};
      s.udp_no_checksum = v == IpVersion::v4 && round % 4 == 0;
      auto f = build_frame(s).bytes;
      ParsedPacket request;
      ASSERT_EQ(parse_frame(f, request), ParseError::none);
      const ParsedPacket sent = request;

      const Service& svc = table.services()[v == IpVersion::v4 ? 0 : 1];
      std::uint16_t chosen = choose_backend(svc, request, table.flow_hash_seed());
      ASSERT_LT(chosen, svc.backends.size());
      ASSERT_EQ(balance(f, request, table, resolve_to_hop), Verdict::forward(3));
      const net::Endpoint& backend = svc.backends[chosen];
      EXPECT_EQ(request.dst_address, backend.address.bytes);
      EXPECT_EQ(request.dst_port, backend.port);
      EXPECT_EQ(request.src_address, sent.src_address);
      EXPECT_EQ(request.src_port, client_port);
      expect_checksums_valid(f, "request to backend");
      if (s.udp_no_checksum) {
        EXPECT_EQ(stored16(f, request.l4_checksum_offset()), 0);
      }
      // The payload arrives byte-exact.
      EXPECT_TRUE(std::equal(f.begin() + request.payload_offset, f.end(), s.payload.begin()));

      // The backend answers: swap and send back (what its stack would do for a UDP echo).
      ASSERT_EQ(reflect(f, request, 0), Verdict::forward(0));
      ParsedPacket reply;
      ASSERT_EQ(parse_frame(f, reply), ParseError::none);
      ASSERT_EQ(table.match(reply).kind, MatchKind::from_backend);
      ASSERT_EQ(balance(f, reply, table, resolve_to_hop), Verdict::forward(3));
      EXPECT_EQ(reply.src_address, sent.dst_address);
      EXPECT_EQ(reply.src_port, sent.dst_port);
      EXPECT_EQ(reply.dst_address, sent.src_address);
      EXPECT_EQ(reply.dst_port, sent.src_port);
      EXPECT_EQ(reply.hop_limit, sent.hop_limit - 2);  // one hop each way through the gateway
      expect_checksums_valid(f, "reply to client");
      if (s.udp_no_checksum) {
        EXPECT_EQ(stored16(f, reply.l4_checksum_offset()), 0);
      }
    }
  }
}

TEST(Balance, EveryWorkersTableChoosesTheSameBackend) {
  std::vector<config::ServiceConfig> configs = {
      service("dns", "10.0.0.10", 53, {"10.0.1.2:53", "10.0.1.3:53", "10.0.1.4:53"})};
  ServiceTable worker_a = build_service_table(configs);
  // Another worker's copy, built from the config in another order.
  std::swap(configs[0].backends[0], configs[0].backends[2]);
  ServiceTable worker_b = build_service_table(configs);
  for (std::uint16_t port = 1; port < 2000; ++port) {
    FrameSpec s;
    s.src_port = port;
    auto fa = build_frame(s).bytes, fb = fa;
    ParsedPacket pa, pb;
    ASSERT_EQ(parse_frame(fa, pa), ParseError::none);
    ASSERT_EQ(parse_frame(fb, pb), ParseError::none);
    ASSERT_EQ(balance_rewrite(fa, pa, worker_a), Verdict::forward(0));
    ASSERT_EQ(balance_rewrite(fb, pb, worker_b), Verdict::forward(0));
    ASSERT_EQ(fa, fb) << "client port " << port;
  }
}

TEST(Balance, NoBackendUpDropsUntouched) {
  std::vector<config::ServiceConfig> configs = {service("dns", "10.0.0.10", 53, {"10.0.1.2:53"})};
  ServiceTableOptions options;
  options.backend_up = [](const config::ServiceConfig&, const net::Endpoint&) { return false; };
  ServiceTable table = build_service_table(configs, options);
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  EXPECT_EQ(balance(f, p, table, resolve_to_hop), Verdict::dropped(Drop::no_backend));
  EXPECT_EQ(f, test::kUdp4);
}

TEST(Balance, NotAServiceOrAReflectServicePassesUntouched) {
  std::vector<config::ServiceConfig> configs = {service("other", "10.0.0.99", 53, {"10.0.1.2:53"})};
  auto mirror = service("mirror", "10.0.0.10", 53, {});
  mirror.mode = config::ServiceMode::reflect;
  configs.push_back(mirror);
  ServiceTable table = build_service_table(configs);
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  EXPECT_EQ(balance_rewrite(f, p, table), Verdict::dropped(Drop::unexpected));
  EXPECT_EQ(balance(f, p, table, resolve_to_hop), Verdict::dropped(Drop::unexpected));
  EXPECT_EQ(f, test::kUdp4);
}

TEST(Balance, TtlExpiredDropsBeforeRewriting) {
  std::vector<config::ServiceConfig> configs = {service("dns", "10.0.0.10", 53, {"10.0.1.2:53"})};
  ServiceTable table = build_service_table(configs);
  FrameSpec s;
  s.hop_limit = 1;
  auto f = build_frame(s).bytes;
  auto original = f;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  EXPECT_EQ(balance(f, p, table, resolve_to_hop), Verdict::dropped(Drop::ttl_expired));
  EXPECT_EQ(f, original);
}

TEST(Balance, NeighbourMissAfterRewriteHoldsTheRewrittenFrame) {
  std::vector<config::ServiceConfig> configs = {service("dns", "10.0.0.10", 53, {"10.0.1.2:53"})};
  ServiceTable table = build_service_table(configs);
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  net::IpAddress asked_for;
  auto miss = [&](const ParsedPacket& q, NextHop&) {
    asked_for = q.destination_ip();
    return Verdict::hold(0);
  };
  EXPECT_EQ(balance(f, p, table, miss), Verdict::hold(0));
  EXPECT_EQ(asked_for.to_string(), "10.0.1.2");  // the lookup is for the backend, not the VIP
  EXPECT_EQ(p.destination_ip().to_string(), "10.0.1.2");
}

TEST(Reflect, SwapsEverythingAndChecksumsStayValid) {
  for (const auto* vector :
       {&test::kUdp4, &test::kUdp6, &test::kTcp4, &test::kQinQUdp4, &test::kUdp4Ihl6}) {
    auto f = *vector;
    ParsedPacket p;
    ASSERT_EQ(parse_frame(f, p), ParseError::none);
    ParsedPacket before = p;
    EXPECT_EQ(reflect(f, p, 7), Verdict::forward(7));
    EXPECT_TRUE(std::equal(f.begin(), f.begin() + 6, vector->begin() + 6));
    EXPECT_TRUE(std::equal(f.begin() + 6, f.begin() + 12, vector->begin()));
    ParsedPacket after;
    ASSERT_EQ(parse_frame(f, after), ParseError::none);
    EXPECT_EQ(after.src_address, before.dst_address);
    EXPECT_EQ(after.dst_address, before.src_address);
    EXPECT_EQ(after.src_port, before.dst_port);
    EXPECT_EQ(after.dst_port, before.src_port);
    EXPECT_EQ(after.hop_limit, before.hop_limit);
    EXPECT_EQ(p.src_address, after.src_address);
    EXPECT_EQ(p.dst_port, after.dst_port);
    // Not one checksum byte changed, and they are right for the swapped packet.
    if (p.is_v4()) {
      EXPECT_EQ(stored16(f, p.l3_offset + 10), stored16(*vector, p.l3_offset + 10));
    }
    EXPECT_EQ(stored16(f, p.l4_checksum_offset()), stored16(*vector, p.l4_checksum_offset()));
    expect_checksums_valid(f, "reflected");
    EXPECT_EQ(l4_checksum(f, after), stored16(f, p.l4_checksum_offset()));
    // Twice is the identity.
    reflect(f, p, 7);
    EXPECT_EQ(f, *vector);
  }
}

TEST(Reflect, AFragmentAfterTheFirstHasOnlyItsAddressesSwapped) {
  FrameSpec spec;
  spec.payload.assign(64, 0x5a);
  auto whole = build_frame(spec).bytes;
  whole[14 + 6] = 0x00;
  whole[14 + 7] = 0x02;  // offset 16: its first 4 bytes would be "ports" to a careless swap
  ParsedPacket p;
  Fragment fragment;
  ASSERT_EQ(parse_fragment(whole, p, fragment), FragmentParse::fragment);
  ASSERT_TRUE(p.fragment_tail);
  const auto before = whole;
  EXPECT_EQ(reflect(whole, p, 3), Verdict::forward(3));
  EXPECT_TRUE(std::equal(whole.begin(), whole.begin() + 6, before.begin() + 6));
  EXPECT_TRUE(
      std::equal(whole.begin() + 14 + 12, whole.begin() + 14 + 16, before.begin() + 14 + 16));
  EXPECT_TRUE(
      std::equal(whole.begin() + 14 + 16, whole.begin() + 14 + 20, before.begin() + 14 + 12));
  EXPECT_TRUE(std::equal(whole.begin() + 14 + 20, whole.end(), before.begin() + 14 + 20))
      << "the data after the IP header is the datagram's, untouched";
  EXPECT_EQ(p.src_address, addr("10.0.0.10"));
}

TEST(Fate, NamesForMetrics) {
  EXPECT_EQ(to_string(Drop::no_backend), "no_backend");
  EXPECT_EQ(to_string(Drop::ttl_expired), "ttl_expired");
  EXPECT_EQ(to_string(Drop::malformed), "malformed");
  EXPECT_EQ(to_string(Drop::unexpected), "unexpected");
  EXPECT_EQ(to_string(Drop::icmp_unmatched), "icmp_unmatched");
  EXPECT_EQ(to_string(Fate::hold), "hold");
  EXPECT_EQ(to_string(Fate::wait), "wait");
}

}  // namespace
}  // namespace ferry::packet
