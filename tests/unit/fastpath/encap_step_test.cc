// Direct server return through process_frame(), called as the worker calls it (the frame in a
// chunk with headroom before it and room after): requests of ipip and gue services leave inside an
// outer header to their backend, every outer field decoded by hand and every checksum recomputed
// with the naive sum; TCP and QUIC-LB choose their backend as UDP does; and the edges (expiring,
// too big once encapsulated, too little headroom, no backend) are answered or dropped by reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/fastpath/flow_table.hh"
#include "lib/fastpath/frame_processor.hh"
#include "lib/fastpath/ip_hop.hh"
#include "lib/packet/balance.hh"
#include "lib/packet/icmp.hh"
#include "lib/packet/parse.hh"
#include "tests/unit/fastpath/ip_hop_state.hh"
#include "tests/unit/fastpath/lab_tables.hh"
#include "tests/unit/fastpath/quic_packets.hh"
#include "tests/unit/packet/ip_hop_builder.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using namespace packet::test;

constexpr std::size_t kL3 = 14;  // no VLAN tags in these frames
const std::string kSource = "10.9.0.1";
const std::string kSourcePrefix = "10.9.0.0/28";
const std::string kSource6 = "2001:db8:9::1";
constexpr std::uint16_t kGuePort = 7000;  // not the default 6080: the config's is used

// The lab's dns service (10.0.0.10:53, UDP and TCP) and an IPv6 twin dns6 (2001:db8::10 port 53,
// backends 2001:db8:2::2 and ::3), both forwarding `forwarding`; xdp.encap with the sources above.
config::Config dsr_config(config::Forwarding forwarding, bool with_source_prefix = false) {
  config::Config c = lab_config();
  c.services[0].protocols = {.udp = true, .tcp = true};
  c.services[0].forwarding = forwarding;
  config::ServiceConfig dns6 = c.services[0];
  dns6.name = "dns6";
  dns6.vip = ip("2001:db8::10");
  dns6.backends = {endpoint("[2001:db8:2::2]:53"), endpoint("[2001:db8:2::3]:53")};
  c.services.push_back(dns6);
  c.xdp.encap = config::EncapConfig{
      ip(kSource), with_source_prefix ? std::optional(prefix(kSourcePrefix)) : std::nullopt,
      ip(kSource6), kGuePort};
  return c;
}

// A TCP-only service web (10.0.0.12:80) forwarding ipip to `backends` (port 80).
config::Config web_config(const std::vector<std::string>& backends) {
  config::Config c = dsr_config(config::Forwarding::ipip);
  config::ServiceConfig web;
  web.name = "web";
  web.vip = ip("10.0.0.12");
  web.port = 80;
  web.protocols = {.udp = false, .tcp = true};
  web.forwarding = config::Forwarding::ipip;
  for (const auto& b : backends) web.backends.push_back(endpoint(b));
  c.services.push_back(web);
  return c;
}

// A TCP segment without data from the client's port `port` to web (or `vip`:`vip_port`) with TCP
// `flags`, its checksum right.
Bytes tcp_segment(std::uint16_t port, std::uint8_t flags, std::uint8_t ttl = 64,
                  const std::string& vip = "10.0.0.12", std::uint16_t vip_port = 80) {
  FrameSpec s = request(port);
  s.protocol = IPPROTO_TCP;
  s.dst = addr(vip);
  s.dst_port = vip_port;
  s.hop_limit = ttl;
  s.payload.clear();
  BuiltFrame b = build_frame(s);
  b.bytes[b.l4_offset + 13] = flags;
  packet::ParsedPacket p;
  EXPECT_EQ(packet::parse_frame({b.bytes.data(), b.bytes.size()}, p), packet::ParseError::none);
  put16(b.bytes, p.l4_checksum_offset(), reference_checksums(b.bytes, p).l4);
  return b.bytes;
}
constexpr std::uint8_t kSyn = 0x02;
constexpr std::uint8_t kAck = 0x10;

// The IP packet the backend should find inside the tunnel: the request as the client sent it but
// for one hop less and a full checksum (one left partial by the client is finished).
Bytes arriving_inner(FrameSpec spec) {
  spec.hop_limit = static_cast<std::uint8_t>(spec.hop_limit - 1);
  spec.partial_checksum = false;
  return ip_packet(build_frame(spec));
}

Bytes bytes_of(const packet::MacAddress& mac) {
  return Bytes(mac.begin(), mac.end());
}

net::IpAddress address_at(const Bytes& f, std::size_t at, packet::IpVersion version) {
  std::array<std::uint8_t, 16> bytes{};
  bool v4 = version == packet::IpVersion::v4;
  std::copy_n(f.begin() + static_cast<std::ptrdiff_t>(at), v4 ? 4 : 16, bytes.begin());
  return {v4 ? AF_INET : AF_INET6, bytes};
}
// The outer header's source and destination.
net::IpAddress outer_source(const Bytes& f, packet::IpVersion version) {
  return address_at(f, kL3 + (version == packet::IpVersion::v4 ? 12 : 8), version);
}
net::IpAddress outer_destination(const Bytes& f, packet::IpVersion version) {
  return address_at(f, kL3 + (version == packet::IpVersion::v4 ? 16 : 24), version);
}

// Sent out of port `slot`, grown at its front by `front` bytes to `frame_bytes` in all.
FrameOutcome sent_with_front(std::uint32_t slot, std::uint32_t front, std::size_t frame_bytes) {
  FrameOutcome o = FrameOutcome::to(slot);
  o.front = front;
  o.length = static_cast<std::uint32_t>(frame_bytes);
  return o;
}

// One of the four outer headers, with what it adds counted by hand: 20 (IPv4 header), 28 (IPv4 +
// UDP), 40 (IPv6 header), 48 (IPv6 + UDP). The client, the VIP and the backends are all of the
// outer header's family here.
struct Path {
  const char* name;
  config::Forwarding forwarding;
  packet::IpVersion version;
  std::uint32_t overhead;
  EncapPath counted_as;

  bool v4() const { return version == packet::IpVersion::v4; }
  bool gue() const { return forwarding == config::Forwarding::gue; }
  std::uint32_t outer_ip_bytes() const { return v4() ? 20 : 40; }
};

void PrintTo(const Path& path, std::ostream* os) {
  *os << path.name;
}

class EncapStepTest : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kHeadroom = 256;  // what the kernel leaves (XDP_PACKET_HEADROOM)
  static constexpr std::uint32_t kRoom = 2048;     // after the frame, to its UMEM frame's end

  void use(const config::Config& c, packet::ServiceTableOptions options = {},
           std::uint32_t backend_port_mtu = 1500) {
    snapshot_ = snapshot(config_tables(c, options), next_hop_tables());
    snapshot_->ports = port_facts(1500, backend_port_mtu);
  }
  // process_frame() with `frame` at `headroom` in a chunk as the worker's UMEM frame, with the
  // IP-hop state; `frame` becomes what leaves (from where it now starts, as long as it now is), or
  // the frame as it was left in the chunk when dropped.
  FrameOutcome run(Bytes& frame, std::uint32_t headroom = kHeadroom, FlowAffinity flows = {}) {
    Bytes chunk(headroom + frame.size() + kRoom, 0);
    std::copy(frame.begin(), frame.end(), chunk.begin() + headroom);
    FrameOutcome o = process_frame({chunk.data() + headroom, frame.size()}, *snapshot_, 0,
                                   {queue_, counters_}, flows, hop(headroom));
    frame = slice(chunk, headroom - o.front, o.length != 0 ? o.length : frame.size());
    return o;
  }
  // follow_held() as the worker calls it for a fragment the table held for `datagram`.
  FrameOutcome run_held(Bytes& frame, std::uint32_t datagram) {
    Bytes chunk(kHeadroom + frame.size() + kRoom, 0);
    std::copy(frame.begin(), frame.end(), chunk.begin() + kHeadroom);
    FrameOutcome o = follow_held({chunk.data() + kHeadroom, frame.size()}, *snapshot_,
                                 {queue_, counters_}, ip_hop_.fragments, datagram, hop(kHeadroom));
    frame = slice(chunk, kHeadroom - o.front, o.length != 0 ? o.length : frame.size());
    return o;
  }
  IpHop hop(std::uint32_t headroom) { return ip_hop_.at(5000, kRoom, headroom); }
  // The frames a request of `spec` leaves as when it is sent twice: one flow, two packets.
  std::array<Bytes, 2> sent_twice(const FrameSpec& spec) {
    std::array<Bytes, 2> out{build_frame(spec).bytes, build_frame(spec).bytes};
    for (Bytes& f : out) EXPECT_EQ(run(f).fate, Fate::forward);
    return out;
  }
  const packet::Service& service(const std::string& name) const {
    for (const packet::Service& s : snapshot_->config->services.services()) {
      if (s.name == name) return s;
    }
    throw std::invalid_argument("no service " + name);
  }
  // The backend Maglev gives request `frame` of service `name`.
  net::IpAddress maglev_backend(const Bytes& frame, const std::string& name) const {
    packet::ParsedPacket p;
    EXPECT_EQ(packet::parse_frame({frame.data(), frame.size()}, p), packet::ParseError::none);
    const packet::Service& s = service(name);
    std::uint16_t b = packet::choose_backend(s, p, snapshot_->config->services.flow_hash_seed());
    EXPECT_LT(b, s.backends.size());
    return b < s.backends.size() ? s.backends[b].address : net::IpAddress{};
  }
  std::uint64_t drops(Drop d) const { return counters_.drops[static_cast<std::size_t>(d)].value(); }
  std::uint64_t encapsulated(EncapPath path) const {
    return counters_.encapsulated_packets[static_cast<std::size_t>(path)].value();
  }
  std::uint64_t encapsulated_total() const {
    std::uint64_t n = 0;
    for (const auto& c : counters_.encapsulated_packets) n += c.value();
    return n;
  }

  // `f` is `inner` inside `path`'s outer header from `source` to `backend`, as it leaves on port
  // 1 for the backend's MAC; outer IPv4 identification `ip_id`.
  void expect_encapsulated(const Bytes& f, const Path& path, const Bytes& inner,
                           const net::IpAddress& source, const net::IpAddress& backend,
                           std::uint16_t ip_id) {
    ASSERT_EQ(f.size(), kL3 + path.overhead + inner.size());
    EXPECT_EQ(slice(f, 0, 6), bytes_of(kBackendMac));
    EXPECT_EQ(slice(f, 6, 6), bytes_of(kPort1Mac));
    const std::uint8_t protocol = path.gue() ? 17 : path.v4() ? 4 : 41;  // UDP, IPIP, IPv6
    if (path.v4()) {
      EXPECT_EQ(stored16(f, 12), 0x0800);
      EXPECT_EQ(f[kL3], 0x45) << "IPv4, no options";
      EXPECT_EQ(f[kL3 + 1], 0) << "TOS: the inner packet's";
      EXPECT_EQ(stored16(f, kL3 + 2), path.overhead + inner.size()) << "total length";
      EXPECT_EQ(stored16(f, kL3 + 4), ip_id);
      EXPECT_EQ(stored16(f, kL3 + 6), 0) << "no DF: the inner packet has none; no fragment";
      EXPECT_EQ(f[kL3 + 8], 64) << "outer TTL";
      EXPECT_EQ(f[kL3 + 9], protocol);
      EXPECT_EQ(stored16(f, kL3 + 10), reference_ipv4_checksum(f, kL3, 20)) << "header checksum";
    } else {
      EXPECT_EQ(stored16(f, 12), 0x86dd);
      EXPECT_EQ(f[kL3] >> 4, 6);
      EXPECT_EQ(stored16(f, kL3) & 0x0ff0, 0) << "traffic class: the inner packet's";
      EXPECT_EQ(stored16(f, kL3 + 4), path.overhead - 40 + inner.size()) << "payload length";
      EXPECT_EQ(f[kL3 + 6], protocol) << "next header";
      EXPECT_EQ(f[kL3 + 7], 64) << "outer hop limit";
    }
    EXPECT_EQ(outer_source(f, path.version), source);
    EXPECT_EQ(outer_destination(f, path.version), backend);
    if (path.gue()) {
      std::size_t udp = kL3 + path.outer_ip_bytes();
      EXPECT_EQ(stored16(f, udp) & 0xc000, 0xc000) << "source port 49152..65535";
      EXPECT_EQ(stored16(f, udp + 2), kGuePort);
      EXPECT_EQ(stored16(f, udp + 4), 8 + inner.size()) << "UDP length";
      if (path.v4()) {
        EXPECT_EQ(stored16(f, udp + 6), 0) << "no UDP checksum over IPv4";
      } else {
        packet::ParsedPacket outer;
        ASSERT_EQ(packet::parse_frame({f.data(), f.size()}, outer), packet::ParseError::none);
        EXPECT_NE(stored16(f, udp + 6), 0) << "IPv6 forbids a zero UDP checksum";
        EXPECT_EQ(stored16(f, udp + 6), reference_checksums(f, outer).l4)
            << "UDP checksum over the pseudo-header, UDP header and inner packet";
      }
    }
    EXPECT_EQ(slice(f, kL3 + path.overhead, inner.size()), inner) << "the inner packet";
  }

  // `f` is the ICMP(v6) error `type`/`code` with `word` (its header's second 32-bit word) from the
  // gateway's port 0 to the client, quoting the IP packet of `original` (cut to the error's
  // largest size), every checksum right.
  void expect_icmp_error(const Bytes& f, packet::IpVersion version, std::uint8_t type,
                         std::uint8_t code, std::uint32_t word, const Bytes& original) {
    bool v4 = version == packet::IpVersion::v4;
    std::size_t icmp = kL3 + (v4 ? 20 : 40);
    std::size_t max_bytes = v4 ? packet::kIcmpErrorMaxIpBytes4 : packet::kIcmpErrorMaxIpBytes6;
    std::size_t quoted = std::min(original.size() - kL3, max_bytes - (icmp + 8 - kL3));
    ASSERT_EQ(f.size(), icmp + 8 + quoted);
    EXPECT_EQ(slice(f, 0, 6), bytes_of(kClientMac));
    EXPECT_EQ(slice(f, 6, 6), bytes_of(kPort0Mac));
    EXPECT_EQ(outer_source(f, version), ip(v4 ? "10.1.0.1" : "2001:db8:1::1"));
    EXPECT_EQ(outer_destination(f, version), ip(v4 ? "10.1.0.5" : "2001:db8:1::5"));
    if (v4) {
      EXPECT_EQ(f[kL3 + 9], IPPROTO_ICMP);
      EXPECT_EQ(stored16(f, kL3 + 10), reference_ipv4_checksum(f, kL3, 20));
    } else {
      EXPECT_EQ(f[kL3 + 6], IPPROTO_ICMPV6);
    }
    EXPECT_EQ(f[icmp], type);
    EXPECT_EQ(f[icmp + 1], code);
    EXPECT_EQ(std::uint32_t{stored16(f, icmp + 4)} << 16 | stored16(f, icmp + 6), word);
    EXPECT_EQ(reference_icmp_sum(f, kL3, icmp, f.size() - icmp, v4), 0xffff) << "ICMP checksum";
    EXPECT_EQ(slice(f, icmp + 8, quoted), slice(original, kL3, quoted))
        << "the request as the client sent it: to the VIP, not encapsulated";
  }

  std::unique_ptr<Snapshot> snapshot_;
  IpHopState ip_hop_;  // the worker's fragment table, ICMP limit, identification and orphans
  ResolutionQueue queue_;
  WorkerCounters counters_;
};

// ---- each outer header ----

class EncapPathTest : public EncapStepTest, public ::testing::WithParamInterface<Path> {
 protected:
  void SetUp() override { use(dsr_config(GetParam().forwarding)); }
  std::string service_name() const { return GetParam().v4() ? "dns" : "dns6"; }
  net::IpAddress source() const { return ip(GetParam().v4() ? kSource : kSource6); }
  // A request whose IP packet is `ip_bytes` long.
  FrameSpec request_of_ip_bytes(std::uint16_t port, std::size_t ip_bytes) const {
    return large_request(port, ip_bytes - (GetParam().v4() ? 28 : 48), GetParam().version);
  }
};

TEST_P(EncapPathTest, ARequestLeavesInsideTheOuterHeaderToItsBackendOneHopLessAndWhole) {
  const Path& path = GetParam();
  std::uint64_t inner_bytes = 0;
  for (bool partial : {false, true}) {
    FrameSpec spec = large_request(partial ? 40001 : 40000, 100, path.version);
    spec.partial_checksum = partial;
    Bytes f = build_frame(spec).bytes;
    const net::IpAddress backend = maglev_backend(f, service_name());
    const Bytes inner = arriving_inner(spec);
    const std::uint16_t ip_id = ip_hop_.next_ip_id;
    EXPECT_EQ(run(f), sent_with_front(1, path.overhead, kL3 + path.overhead + inner.size()))
        << "out of port 1, the kernel's route to the backend; grown at its front";
    expect_encapsulated(f, path, inner, source(), backend, ip_id);
    inner_bytes += inner.size();
  }
  EXPECT_EQ(counters_.checksums_partial.value(), 1u);
  EXPECT_EQ(encapsulated(path.counted_as), 2u);
  EXPECT_EQ(encapsulated_total(), 2u);
  EXPECT_EQ(counters_.encapsulated_bytes[static_cast<std::size_t>(path.counted_as)].value(),
            inner_bytes)
      << "the inner packets' IP bytes";
}

TEST_P(EncapPathTest, AnExpiringRequestIsAnsweredWithTimeExceededAndNotEncapsulated) {
  const Path& path = GetParam();
  FrameSpec spec = large_request(40000, 100, path.version);
  spec.hop_limit = 1;
  const Bytes original = build_frame(spec).bytes;
  Bytes f = original;
  FrameOutcome o = run(f);
  EXPECT_EQ(o.fate, Fate::forward);
  EXPECT_EQ(o.egress_slot, 0u) << "back to the client";
  EXPECT_EQ(o.front, 0u);
  expect_icmp_error(f, path.version, path.v4() ? 11 : 3, 0, 0, original);
  EXPECT_EQ(drops(Drop::ttl_expired), 1u);
  EXPECT_EQ(counters_.icmp_time_exceeded.value(), 1u);
  EXPECT_EQ(encapsulated_total(), 0u);
}

TEST_P(EncapPathTest, ARequestTooBigOnceEncapsulatedGetsTheLinkMtuLessTheOverhead) {
  const Path& path = GetParam();
  use(dsr_config(path.forwarding), {}, 1400);
  // As large as fits port 1 once encapsulated: sent.
  FrameSpec fits = request_of_ip_bytes(40000, 1400 - path.overhead);
  Bytes f = build_frame(fits).bytes;
  const net::IpAddress backend = maglev_backend(f, service_name());
  const std::uint16_t ip_id = ip_hop_.next_ip_id;
  ASSERT_EQ(run(f), sent_with_front(1, path.overhead, kL3 + 1400));
  expect_encapsulated(f, path, arriving_inner(fits), source(), backend, ip_id);

  // One byte more: too big, though it would fit port 1 as it came. IPv4 without DF too: the
  // outer packet is never fragmented.
  const Bytes original = build_frame(request_of_ip_bytes(40000, 1400 - path.overhead + 1)).bytes;
  Bytes too_big = original;
  FrameOutcome o = run(too_big);
  EXPECT_EQ(o.fate, Fate::forward);
  EXPECT_EQ(o.egress_slot, 0u) << "back to the client";
  EXPECT_EQ(o.fragment_mtu, 0u);
  const std::uint32_t mtu = 1400 - path.overhead;
  if (path.v4()) {
    expect_icmp_error(too_big, path.version, 3, 4, mtu, original);  // fragmentation needed
  } else {
    expect_icmp_error(too_big, path.version, 2, 0, mtu, original);  // packet too big
  }
  EXPECT_EQ(drops(Drop::too_big), 1u);
  EXPECT_EQ(counters_.icmp_too_big.value(), 1u);
  EXPECT_EQ(encapsulated(path.counted_as), 1u);
}

TEST_P(EncapPathTest, LessHeadroomThanTheOuterHeaderDropsTheRequestUntouched) {
  const Path& path = GetParam();
  const Bytes original = build_frame(large_request(40000, 100, path.version)).bytes;
  Bytes f = original;
  EXPECT_EQ(run(f, path.overhead - 1), FrameOutcome::dropped(Drop::no_headroom));
  EXPECT_EQ(f, original) << "not a byte changed, TTL included";
  f = original;
  EXPECT_EQ(run(f, path.overhead),
            sent_with_front(1, path.overhead, original.size() + path.overhead))
      << "exactly the outer header's room is enough";
  EXPECT_EQ(encapsulated(path.counted_as), 1u);
}

// The fragments of a 3,008-byte UDP datagram (3,000 bytes of data): three pieces of at most 1,480
// (IPv4) or 1,448 (IPv6) bytes, 8-byte multiples but the last.
std::vector<Bytes> fragments_of(const BuiltFrame& whole, packet::IpVersion version) {
  if (version == packet::IpVersion::v4) {
    return {ipv4_fragment(whole, 0, 1480, true), ipv4_fragment(whole, 1480, 1480, true),
            ipv4_fragment(whole, 2960, 48, false)};
  }
  return {ipv6_fragment(whole, 0, 1448, true, 77), ipv6_fragment(whole, 1448, 1448, true, 77),
          ipv6_fragment(whole, 2896, 112, false, 77)};
}

TEST_P(EncapPathTest, EveryFragmentOfADatagramGoesInsideTheTunnelToItsFirstFragmentsBackend) {
  const Path& path = GetParam();
  use(dsr_config(path.forwarding), {}, 1600);  // the backend side fits a full fragment encapsulated
  const BuiltFrame whole = build_frame(large_request(40000, 3000, path.version));
  const net::IpAddress backend = maglev_backend(whole.bytes, service_name());
  std::vector<Bytes> pieces = fragments_of(whole, path.version);
  const std::vector<Bytes> arrived = pieces;

  // The last fragment comes first: held for the first.
  FrameOutcome last = run(pieces[2]);
  ASSERT_EQ(last.fate, Fate::wait);
  FrameOutcome first = run(pieces[0]);
  ASSERT_EQ(first.fate, Fate::forward);
  EXPECT_EQ(first.release, last.datagram) << "the held fragment is released by the first";
  EXPECT_EQ(run(pieces[1]).fate, Fate::forward);
  pieces[2] = arrived[2];
  EXPECT_EQ(run_held(pieces[2], last.datagram).fate, Fate::forward);

  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Bytes& f = pieces[i];
    SCOPED_TRACE(i);
    ASSERT_EQ(f.size(), arrived[i].size() + path.overhead);
    EXPECT_EQ(outer_destination(f, path.version), backend);
    EXPECT_EQ(outer_source(f, path.version), source());
    // The inner fragment as it came, one hop less.
    const std::size_t inner = kL3 + path.overhead;
    const std::size_t ttl = path.v4() ? 8 : 7;
    EXPECT_EQ(f[inner + ttl], arrived[i][kL3 + ttl] - 1) << "TTL / hop limit";
    const std::size_t after = path.v4() ? 12 : 8;  // past the TTL and, for IPv4, its checksum
    EXPECT_EQ(slice(f, inner + after, f.size() - inner - after),
              slice(arrived[i], kL3 + after, arrived[i].size() - kL3 - after));
    if (path.v4()) {
      EXPECT_EQ(stored16(f, inner + 10), reference_ipv4_checksum(f, inner, 20));
    }
  }
  // One flow: the same outer header (GUE source port, IPv6 flow label) for every fragment.
  if (path.gue()) {
    const std::size_t udp = kL3 + path.outer_ip_bytes();
    for (const Bytes& f : pieces) EXPECT_EQ(stored16(f, udp), stored16(pieces[0], udp));
  }
  if (!path.v4()) {
    for (const Bytes& f : pieces)
      EXPECT_EQ(slice(f, kL3, 4), slice(pieces[0], kL3, 4)) << "flow label";
  }
  EXPECT_EQ(counters_.fragments_forwarded.value(), 3u);
  EXPECT_EQ(encapsulated(path.counted_as), 3u);
}

TEST_P(EncapPathTest, AFirstFragmentTooBigForTheTunnelIsAnsweredALaterOneOnlyDropped) {
  const Path& path = GetParam();
  const BuiltFrame whole = build_frame(large_request(40000, 3000, path.version));
  // A link of 1,400 bytes: a 620-byte first fragment fits once encapsulated, a 1,400-byte one not.
  use(dsr_config(path.forwarding), {}, 1400);
  const std::size_t header = path.v4() ? 20 : 48;  // IPv6: the fixed header and the Fragment one
  const std::size_t big = (1400 - header) / 8 * 8;
  std::vector<Bytes> fits = path.v4()
                                ? std::vector<Bytes>{ipv4_fragment(whole, 0, 600, true),
                                                     ipv4_fragment(whole, 600, big, true)}
                                : std::vector<Bytes>{ipv6_fragment(whole, 0, 600, true, 78),
                                                     ipv6_fragment(whole, 600, big, true, 78)};
  EXPECT_EQ(run(fits[0]).fate, Fate::forward);
  FrameOutcome later = run(fits[1]);
  EXPECT_EQ(later.fate, Fate::drop);
  EXPECT_EQ(later.drop, Drop::too_big) << "no error about a fragment but the first";

  // Another datagram of the same flow (another identification).
  auto other = [&](std::size_t offset, std::size_t data, bool more) {
    if (!path.v4()) return ipv6_fragment(whole, offset, data, more, 79);
    Bytes f = ipv4_fragment(whole, offset, data, more);
    put16(f, kL3 + 4, 0x4242);
    fix_ipv4_checksum(f, kL3);
    return f;
  };
  Bytes first = other(0, big, true);
  FrameOutcome answered = run(first);
  EXPECT_EQ(answered.fate, Fate::forward) << "the client gets fragmentation needed / too big";
  EXPECT_EQ(answered.egress_slot, 0u);
  packet::ParsedPacket p;
  packet::ParseError err = packet::parse_frame({first.data(), first.size()}, p);
  EXPECT_TRUE(err == packet::ParseError::none || err == packet::ParseError::unsupported_protocol);
  EXPECT_EQ(p.protocol, path.v4() ? std::uint8_t{IPPROTO_ICMP} : std::uint8_t{IPPROTO_ICMPV6});
  // The rest of that datagram is refused with it.
  Bytes rest = other(big, 48, false);
  EXPECT_EQ(run(rest).drop, Drop::fragment_refused);
  EXPECT_EQ(encapsulated_total(), 1u) << "the first datagram's first fragment only";
}

INSTANTIATE_TEST_SUITE_P(
    Paths, EncapPathTest,
    ::testing::Values(
        Path{"Ipip4", config::Forwarding::ipip, packet::IpVersion::v4, 20, EncapPath::ipip4},
        Path{"Gue4", config::Forwarding::gue, packet::IpVersion::v4, 28, EncapPath::gue4},
        Path{"Ipip6", config::Forwarding::ipip, packet::IpVersion::v6, 40, EncapPath::ipip6},
        Path{"Gue6", config::Forwarding::gue, packet::IpVersion::v6, 48, EncapPath::gue6}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- how flows spread and where they go ----

const Path kIpip4{"Ipip4", config::Forwarding::ipip, packet::IpVersion::v4, 20, EncapPath::ipip4};

TEST_F(EncapStepTest, IpipOuterSourcesVaryPerFlowWithinTheSourcePrefix) {
  use(dsr_config(config::Forwarding::ipip, true));
  const net::Prefix within = prefix(kSourcePrefix);
  std::set<net::IpAddress> sources;
  for (std::uint16_t port = 40000; port < 40064; ++port) {
    auto [f, again] = sent_twice(request(port));
    net::IpAddress source = outer_source(f, packet::IpVersion::v4);
    EXPECT_TRUE(within.contains(source)) << source.to_string();
    EXPECT_NE(source, ip("10.9.0.0")) << "never the subnet's address";
    EXPECT_NE(source, ip("10.9.0.15")) << "never its broadcast";
    EXPECT_EQ(outer_source(again, packet::IpVersion::v4), source) << "a flow keeps its source";
    EXPECT_EQ(stored16(f, kL3 + 10), reference_ipv4_checksum(f, kL3, 20));
    sources.insert(source);
  }
  EXPECT_GE(sources.size(), 10u) << "64 flows over the prefix's 14 hosts";
}

TEST_F(EncapStepTest, GueKeepsTheSourceAndVariesItsUdpSourcePortPerFlow) {
  use(dsr_config(config::Forwarding::gue, true));
  std::set<std::uint16_t> source_ports;
  for (std::uint16_t port = 40000; port < 40064; ++port) {
    auto [f, again] = sent_twice(request(port));
    EXPECT_EQ(outer_source(f, packet::IpVersion::v4), ip(kSource))
        << "source_prefix is IPIP's (docs/config.md); GUE spreads by its source port";
    EXPECT_EQ(stored16(again, kL3 + 20), stored16(f, kL3 + 20)) << "a flow keeps its port";
    source_ports.insert(stored16(f, kL3 + 20));
  }
  EXPECT_GE(source_ports.size(), 60u) << "64 flows over 16,384 ports";
}

TEST_F(EncapStepTest, Ipv6OuterHeadersCarryAFlowLabelPerFlow) {
  use(dsr_config(config::Forwarding::ipip));
  std::set<std::uint32_t> labels;
  for (std::uint16_t port = 40000; port < 40064; ++port) {
    auto [f, again] = sent_twice(large_request(port, 20, packet::IpVersion::v6));
    std::uint32_t label = (std::uint32_t{stored16(f, kL3)} << 16 | stored16(f, kL3 + 2)) & 0xfffff;
    EXPECT_EQ(slice(again, kL3, 4), slice(f, kL3, 4)) << "a flow keeps its label";
    labels.insert(label);
  }
  EXPECT_GE(labels.size(), 60u) << "64 flows over 2^20 labels";
}

TEST_F(EncapStepTest, ABackendBehindARouterLeavesWithTheRoutersMac) {
  use(web_config({"10.3.0.7:80"}));  // 10.3.0.0/16 is behind 10.2.0.254 on port 1
  Bytes f = tcp_segment(40000, kSyn);
  ASSERT_EQ(run(f), sent_with_front(1, 20, kL3 + 20 + 40));
  EXPECT_EQ(slice(f, 0, 6), bytes_of(kRouterMac)) << "the route's gateway, not the backend";
  EXPECT_EQ(slice(f, 6, 6), bytes_of(kPort1Mac));
  EXPECT_EQ(outer_destination(f, packet::IpVersion::v4), ip("10.3.0.7"));
}

TEST_F(EncapStepTest, AMissedNextHopHoldsTheFrameEncapsulatedAlready) {
  use(dsr_config(config::Forwarding::ipip));
  snapshot_->next_hops = next_hop_tables(false);
  FrameSpec spec = request(40000);
  Bytes f = build_frame(spec).bytes;
  const net::IpAddress backend = maglev_backend(f, "dns");
  FrameOutcome o = run(f);
  FrameOutcome held = FrameOutcome::held(1, {1, packet::IpVersion::v4, backend.bytes});
  held.front = 20;
  held.length = static_cast<std::uint32_t>(f.size());
  EXPECT_EQ(o, held) << "waits for the backend's MAC, the outer header written";
  EXPECT_EQ(f.size(), kL3 + 20 + arriving_inner(spec).size());
  EXPECT_EQ(outer_destination(f, packet::IpVersion::v4), backend);
  EXPECT_EQ(slice(f, kL3 + 20, f.size() - kL3 - 20), arriving_inner(spec));
  auto report = queue_.pop();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->key.address, backend.bytes);
}

TEST_F(EncapStepTest, ATcpConnectionKeepsItsBackendWhenABackendIsAdded) {
  const config::Config three = web_config({"10.2.0.2:80", "10.2.0.3:80", "10.2.0.4:80"});
  const config::Config four =
      web_config({"10.2.0.2:80", "10.2.0.3:80", "10.2.0.4:80", "10.2.0.5:80"});
  // A client port whose Maglev backend changes when the fourth is added.
  std::uint16_t port = 0;
  net::IpAddress before, after;
  for (std::uint16_t p = 41000; p < 41100 && port == 0; ++p) {
    use(three);
    before = maglev_backend(tcp_segment(p, kSyn), "web");
    use(four);
    after = maglev_backend(tcp_segment(p, kSyn), "web");
    if (before != after) port = p;
  }
  ASSERT_NE(port, 0) << "no flow moved in 100";

  // The XDP program steers an encapsulating service's TCP to the worker: the SYN is carried.
  FlowTable table{4096, 30000, counters_.flows};
  use(three);
  Bytes syn = tcp_segment(port, kSyn);
  const std::uint16_t ip_id = ip_hop_.next_ip_id;
  ASSERT_EQ(run(syn, kHeadroom, {&table, 1000}), sent_with_front(1, 20, kL3 + 20 + 40));
  expect_encapsulated(syn, kIpip4, slice(tcp_segment(port, kSyn, 63), kL3, 40), ip(kSource), before,
                      ip_id);

  use(four);
  Bytes ack = tcp_segment(port, kAck);
  ASSERT_EQ(run(ack, kHeadroom, {&table, 2000}).fate, Fate::forward);
  EXPECT_EQ(outer_destination(ack, packet::IpVersion::v4), before)
      << "the connection's backend, not Maglev's new choice";
  EXPECT_EQ(slice(ack, kL3 + 20, 40), slice(tcp_segment(port, kAck, 63), kL3, 40));
  EXPECT_EQ(counters_.flows.misses.value(), 1u);
  EXPECT_EQ(counters_.flows.hits.value(), 1u);

  Bytes without_table = tcp_segment(port, kAck);
  ASSERT_EQ(run(without_table).fate, Fate::forward);
  EXPECT_EQ(outer_destination(without_table, packet::IpVersion::v4), after) << "Maglev's";

  // A service of UDP and TCP takes both.
  Bytes to_dns = tcp_segment(port, kSyn, 64, "10.0.0.10", 53);
  ASSERT_EQ(run(to_dns), sent_with_front(1, 20, kL3 + 20 + 40));
  EXPECT_EQ(slice(to_dns, kL3 + 20, 40),
            slice(tcp_segment(port, kSyn, 63, "10.0.0.10", 53), kL3, 40));
  EXPECT_EQ(encapsulated(EncapPath::ipip4), 4u);
}

TEST_F(EncapStepTest, AQuicConnectionIdSendsItsPacketsToItsServerWhateverTheClientPort) {
  config::Config c = dsr_config(config::Forwarding::ipip);
  config::QuicLbConfigEntry e;
  e.id = 1;
  e.server_id_bytes = 2;
  e.nonce_bytes = 6;
  use_quic_lb(c.services[0], e);
  use(c);
  for (std::size_t b = 0; b < c.services[0].backends.size(); ++b) {
    for (std::uint16_t port = 40000; port < 40032; ++port) {
      FrameSpec spec = request(port);
      spec.payload = short_header(c.services[0], b, static_cast<std::uint8_t>(port));
      Bytes f = build_frame(spec).bytes;
      ASSERT_EQ(run(f).fate, Fate::forward);
      EXPECT_EQ(outer_destination(f, packet::IpVersion::v4), c.services[0].backends[b].address)
          << "client port " << port;
      EXPECT_EQ(slice(f, kL3 + 20, f.size() - kL3 - 20), arriving_inner(spec));
    }
  }
  EXPECT_EQ(counters_.quic_lb_routed[1].value(), 3u * 32);
  EXPECT_EQ(encapsulated(EncapPath::ipip4), 3u * 32);
}

TEST_F(EncapStepTest, NoBackendUpDropsTheRequestUntouched) {
  packet::ServiceTableOptions all_down;
  all_down.backend_up = [](const config::ServiceConfig&, const net::Endpoint&) { return false; };
  use(dsr_config(config::Forwarding::ipip), all_down);
  const Bytes original = build_frame(request()).bytes;
  Bytes f = original;
  EXPECT_EQ(run(f), FrameOutcome::dropped(Drop::no_backend));
  EXPECT_EQ(f, original);
  EXPECT_EQ(encapsulated_total(), 0u);
}

TEST_F(EncapStepTest, AnErrorAboutAReplyGoesUnchangedInsideTheTunnelToTheFlowsBackend) {
  use(dsr_config(config::Forwarding::ipip));
  const net::IpAddress backend = maglev_backend(build_frame(request(40000)).bytes, "dns");
  // The client's stack refuses a reply the backend sent it from the VIP.
  FrameSpec got = reply();
  got.src = addr("10.0.0.10");
  got.hop_limit = 62;
  IcmpSpec error;
  error.src = addr("10.1.0.5");
  error.dst = addr("10.0.0.10");
  error.quote = ip_packet(build_frame(got));
  Bytes f = build_icmp_frame(error).bytes;
  Bytes inner = slice(f, kL3, f.size() - kL3);
  inner[8] = 63;  // one hop less, header checksum made right again
  put16(inner, 10, reference_ipv4_checksum(inner, 0, 20));
  const std::uint16_t ip_id = ip_hop_.next_ip_id;
  ASSERT_EQ(run(f), sent_with_front(1, 20, kL3 + 20 + inner.size()));
  expect_encapsulated(f, kIpip4, inner, ip(kSource), backend, ip_id);
  EXPECT_EQ(counters_.icmp_translated.value(), 1u);
}

TEST_F(EncapStepTest, AnErrorTooBigForTheTunnelIsDroppedNotAnsweredWithAnother) {
  // The client's stack refuses a reply from dns6's VIP with an ICMPv6 error of the largest size,
  // 1,280 bytes: 1,328 once inside GUE over IPv6.
  FrameSpec got = large_request(40000, 1184, packet::IpVersion::v6);
  std::swap(got.src, got.dst);
  std::swap(got.src_port, got.dst_port);
  IcmpSpec error;
  error.version = packet::IpVersion::v6;
  error.src = addr("2001:db8:1::5");
  error.dst = addr("2001:db8::10");
  error.type = packet::kIcmp6DestinationUnreachable;
  error.code = 4;  // port unreachable
  error.quote = ip_packet(build_frame(got));
  const Bytes original = build_icmp_frame(error).bytes;
  ASSERT_EQ(original.size(), kL3 + 1280);

  use(dsr_config(config::Forwarding::gue), {}, 1300);
  Bytes f = original;
  EXPECT_EQ(run(f), FrameOutcome::dropped(Drop::too_big))
      << "no ICMP error about an ICMP error (RFC 4443 2.4 (e))";
  EXPECT_EQ(f, original);
  EXPECT_EQ(counters_.icmp_too_big.value(), 0u);

  use(dsr_config(config::Forwarding::gue), {}, 1328);
  f = original;
  EXPECT_EQ(run(f), sent_with_front(1, 48, kL3 + 1328)) << "where it fits, it is carried";
  EXPECT_EQ(counters_.icmp_translated.value(), 1u);
}

}  // namespace
}  // namespace ferry::fastpath
