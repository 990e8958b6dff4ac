// libFuzzer target for lib/packet: parse any bytes; when they parse, run route, balance and
// reflect each on its own copy and check that the result still parses to the same shape and that
// checksums which were right before are right after; encapsulate it each way (IPIP, GUE; over
// IPv4, IPv6) and check that the outer packet parses as p then says, around the same inner bytes;
// and that a match with any XDP hint (taken from the input's last bytes) is the table's own match
// or one the frame really fits. Built and run by `make fuzz` (docs/testing.md).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "lib/packet/balance.hh"
#include "lib/packet/checksum.hh"
#include "lib/packet/encap.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/reflect.hh"
#include "lib/packet/route.hh"
#include "lib/packet/route_table.hh"
#include "lib/packet/service_table.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry;
using namespace ferry::packet;

config::ServiceConfig service(const char* name, const char* vip, std::uint16_t port,
                              std::vector<const char*> backends,
                              config::ServiceMode mode = config::ServiceMode::proxy) {
  config::ServiceConfig s;
  s.name = name;
  s.vip = *net::IpAddress::parse(vip);
  s.port = port;
  s.mode = mode;
  for (const char* b : backends) s.backends.push_back(*net::Endpoint::parse(b));
  return s;
}

// Services the seed corpus aims at (tests/fuzz/corpus/packet): a v4 and a v6 balance service,
// one whose only backend is down, and a reflect service.
const ServiceTable& table() {
  static const ServiceTable t = [] {
    std::vector<config::ServiceConfig> configs = {
        service("dns", "10.0.0.10", 53, {"10.0.1.2:53", "10.0.1.3:53", "10.0.1.4:5353"}),
        service("dns6", "2001:db8:ffff::10", 53, {"[2001:db8:1::2]:53", "[2001:db8:1::3]:53"}),
        service("dark", "10.0.0.12", 53, {"10.0.1.9:53"}),
        service("mirror", "10.0.0.11", 9, {}, config::ServiceMode::reflect)};
    ServiceTableOptions options;
    options.maglev_size = 251;
    options.backend_up = [](const config::ServiceConfig& s, const net::Endpoint&) {
      return s.name != "dark";
    };
    // Steering ids with a gap and out of order, as the XDP maps give them after reloads.
    options.steering_id = [](const config::ServiceConfig& s) -> std::optional<std::uint32_t> {
      if (s.name == "dns") return 3;
      if (s.name == "dns6") return 0;
      if (s.name == "dark") return 7;
      return 1;
    };
    return build_service_table(configs, options);
  }();
  return t;
}

const RouteTable& routes() {
  static const RouteTable t = [] {
    std::vector<config::RouteConfig> r = {
        {*net::Prefix::parse("10.0.0.0/8"), "eth1", {.udp = true, .tcp = false}},
        {*net::Prefix::parse("2001:db8::/32"), "eth1", {.udp = true, .tcp = true}}};
    return RouteTable::build(r, [](std::string_view) { return std::optional<std::uint32_t>(1); });
  }();
  return t;
}

const NextHop kHop{.egress_port = 1, .src_mac = {2, 0, 0, 0, 1, 1}, .dst_mac = {2, 0, 0, 0, 1, 2}};

Verdict resolve(const ParsedPacket& p, NextHop& out) {
  if (!routes().lookup(p)) return Verdict::dropped(Drop::no_route);
  out = kHop;
  return Verdict::forward(kHop.egress_port);
}

// Whatever the hint, the match is the table's own (no hint, or one that does not hold) or one
// that the frame fits: to that service's VIP and port, or from that backend.
void check_hinted_match(const ParsedPacket& p, const MatchHint& hint) {
  ServiceMatch own = table().match(p);
  ServiceMatch hinted = table().match(p, hint);
  if (hint.kind == MatchKind::none) {
    FUZZ_CHECK(hinted.kind == own.kind && hinted.service == own.service);
    return;
  }
  if (hinted.kind == MatchKind::to_service) {
    FUZZ_CHECK(hinted.service->vip.bytes == p.dst_address && hinted.service->port == p.dst_port);
  } else if (hinted.kind == MatchKind::from_backend) {
    const net::Endpoint& b = hinted.service->backends[hinted.backend];
    FUZZ_CHECK(b.address.bytes == p.src_address && b.port == p.src_port);
  } else {
    FUZZ_CHECK(own.kind == MatchKind::none);
  }
}

// Both checksums exactly as a sender computes them (the canonical representation; a stored
// 0xffff standing for a computed 0 in TCP is not, and is not checked).
struct ChecksumState {
  bool ipv4_ok = true;
  bool l4_ok = false;
  bool udp_none = false;  // UDP checksum 0: none sent
};

ChecksumState checksums(const std::vector<std::uint8_t>& f, const ParsedPacket& p) {
  ChecksumState s;
  if (p.is_v4()) {
    std::uint16_t stored =
        static_cast<std::uint16_t>(f[p.l3_offset + 10] << 8 | f[p.l3_offset + 11]);
    s.ipv4_ok = stored == ipv4_header_checksum(f.data() + p.l3_offset, p.l4_offset - p.l3_offset);
  }
  std::uint16_t stored = load_be16(f.data() + p.l4_checksum_offset());
  s.udp_none = p.protocol == IPPROTO_UDP && stored == 0;
  s.l4_ok = stored == l4_checksum(f, p);
  return s;
}

// After an action: the frame still parses, to the same offsets and the tuple `p` says, and every
// checksum that was right before is right now (a UDP "none" stays none).
void check_after(const std::vector<std::uint8_t>& f, const ParsedPacket& p,
                 const ParsedPacket& before, const ChecksumState& was) {
  ParsedPacket again;
  FUZZ_CHECK(parse_frame(f, again) == ParseError::none);
  FUZZ_CHECK(again.l3_offset == before.l3_offset && again.l4_offset == before.l4_offset &&
             again.payload_offset == before.payload_offset &&
             again.payload_bytes == before.payload_bytes);
  FUZZ_CHECK(again.src_address == p.src_address && again.dst_address == p.dst_address);
  FUZZ_CHECK(again.src_port == p.src_port && again.dst_port == p.dst_port);
  FUZZ_CHECK(again.hop_limit == p.hop_limit);
  ChecksumState now = checksums(f, again);
  if (was.ipv4_ok) FUZZ_CHECK(now.ipv4_ok);
  if (was.udp_none) FUZZ_CHECK(now.udp_none);
  if (was.l4_ok && !was.udp_none) FUZZ_CHECK(now.l4_ok);
}

// Runs every action on its own copy of `original` (parsed as `p`) and checks the results.
void run_actions(const std::vector<std::uint8_t>& original, const ParsedPacket& p) {
  const ChecksumState was = checksums(original, p);
  {  // route
    auto f = original;
    ParsedPacket q = p;
    Verdict v = route(f, q, kHop);
    if (v.fate == Fate::forward) {
      FUZZ_CHECK(q.hop_limit == p.hop_limit - 1);
      check_after(f, q, p, was);
    } else {
      FUZZ_CHECK(v.drop == Drop::ttl_expired && f == original);
    }
  }
  {  // balance, then the reply's way back when the request went to a backend
    auto f = original;
    ParsedPacket q = p;
    ServiceMatch m = table().match(q);
    Verdict v = balance(f, q, table(), resolve);
    if (v.fate == Fate::forward) {
      check_after(f, q, p, was);
      if (m.kind == MatchKind::to_service) {
        // The backend's answer, then the reverse rewrite: the client sees its own tuple reversed.
        reflect(f, q, 0);
        ChecksumState reply_was = checksums(f, q);
        ParsedPacket reply_before = q;
        // (Unless the client itself sent from a VIP:port: then the answer is a new request.)
        bool is_reply = table().match(q).kind == MatchKind::from_backend;
        if (balance(f, q, table(), resolve).fate == Fate::forward && is_reply) {
          FUZZ_CHECK(q.src_address == p.dst_address && q.src_port == p.dst_port);
          FUZZ_CHECK(q.dst_address == p.src_address && q.dst_port == p.src_port);
          check_after(f, q, reply_before, reply_was);
        }
      }
    } else if (v.drop == Drop::unexpected || v.drop == Drop::no_backend ||
               v.drop == Drop::ttl_expired) {
      FUZZ_CHECK(f == original);
    }
  }
  {  // a partial checksum (what a veth sender leaves), finished after the DNAT, always verifies
    auto f = original;
    ParsedPacket q = p;
    if (q.protocol == IPPROTO_UDP || q.protocol == IPPROTO_TCP) {
      std::uint16_t sum = pseudo_header_sum(q);
      f[q.l4_checksum_offset()] = static_cast<std::uint8_t>(sum >> 8);
      f[q.l4_checksum_offset() + 1] = static_cast<std::uint8_t>(sum);
      FUZZ_CHECK(classify_l4_checksum(f, q) == L4Checksum::partial);
      if (balance(f, q, table(), resolve).fate == Fate::forward) {
        finish_l4_checksum(f, q);
        FUZZ_CHECK(checksums(f, q).l4_ok);
      }
    }
  }
  {  // reflect, twice: the identity
    auto f = original;
    ParsedPacket q = p;
    FUZZ_CHECK(reflect(f, q, 5) == Verdict::forward(5));
    check_after(f, q, p, was);
    reflect(f, q, 5);
    FUZZ_CHECK(f == original);
  }
}

// Each encapsulation of a parsed frame in a room with 48 bytes of headroom: the outer packet
// parses back as p now describes it, with a right IPv4 header (and GUE-over-IPv6 UDP) checksum,
// and the inner packet's bytes are where and what they were; with a byte too little headroom,
// nothing is written.
void check_encapsulations(const std::vector<std::uint8_t>& original, const ParsedPacket& p,
                          std::uint32_t flow_hash) {
  constexpr std::uint32_t kRoomHeadroom = 48;
  for (bool v6 : {false, true}) {
    for (EncapKind kind : {EncapKind::ipip, EncapKind::gue}) {
      EncapHeader h{kind,
                    *net::IpAddress::parse(v6 ? "2001:db8::a" : "10.0.0.1"),
                    *net::IpAddress::parse(v6 ? "2001:db8:1::7" : "10.0.1.7"),
                    6080,
                    7,
                    flow_hash};
      std::uint32_t overhead = encap_overhead(kind, v6);
      std::vector<std::uint8_t> room(kRoomHeadroom, 0xee);
      room.insert(room.end(), original.begin(), original.end());
      const std::vector<std::uint8_t> before = room;
      ParsedPacket q = p;
      std::uint32_t skip = kRoomHeadroom - (overhead - 1);  // the room starts a byte too late
      Encapsulated e = encapsulate({room.data() + skip, room.size() - skip}, overhead - 1, q, h);
      FUZZ_CHECK(e.error == EncapError::no_headroom && room == before);
      e = encapsulate(room, kRoomHeadroom, q, h);
      if (p.l3_bytes + overhead - (v6 ? kIpv6HeaderBytes : 0) > 0xffff) {
        FUZZ_CHECK(e.error == EncapError::too_long && room == before);
        continue;
      }
      FUZZ_CHECK(e.ok() && e.frame_offset == kRoomHeadroom - overhead);
      FUZZ_CHECK(e.frame_bytes == p.l3_offset + encapsulated_ip_bytes(p.l3_bytes, kind, v6));
      std::size_t inner = kRoomHeadroom + p.l3_offset;
      FUZZ_CHECK(std::memcmp(room.data() + inner, original.data() + p.l3_offset, p.l3_bytes) == 0);
      std::vector<std::uint8_t> f(room.begin() + e.frame_offset,
                                  room.begin() + e.frame_offset + e.frame_bytes);
      ParsedPacket outer;
      ParseError pe = parse_frame(f, outer);
      FUZZ_CHECK(pe ==
                 (kind == EncapKind::gue ? ParseError::none : ParseError::unsupported_protocol));
      FUZZ_CHECK(outer.l3_offset == q.l3_offset && outer.l3_bytes == q.l3_bytes &&
                 outer.l4_offset == q.l4_offset && outer.protocol == q.protocol &&
                 outer.src_address == q.src_address && outer.dst_address == q.dst_address &&
                 outer.hop_limit == kEncapTtl);
      if (!v6) {
        FUZZ_CHECK(load_be16(f.data() + q.l3_offset + 10) ==
                   ipv4_header_checksum(f.data() + q.l3_offset, kIpv4MinHeaderBytes));
      }
      if (kind == EncapKind::gue) {
        FUZZ_CHECK(outer.src_port == q.src_port && outer.dst_port == 6080);
        FUZZ_CHECK(load_be16(f.data() + q.l4_checksum_offset()) == (v6 ? l4_checksum(f, q) : 0));
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ParsedPacket p;
  ParseError e = parse_frame({data, size}, p);
  (void)to_string(e);
  (void)passes_to_kernel(e);
  if (e != ParseError::none) return 0;
  FUZZ_CHECK(p.l3_offset + std::uint64_t{p.l3_bytes} <= size);
  FUZZ_CHECK(p.payload_offset + std::uint64_t{p.payload_bytes} <= size);

  if (size >= 3) {
    std::uint8_t k = data[size - 3] % 3;
    check_hinted_match(p, {k == 0   ? MatchKind::none
                           : k == 1 ? MatchKind::to_service
                                    : MatchKind::from_backend,
                           static_cast<std::uint16_t>(data[size - 2] % 9),
                           static_cast<std::uint16_t>(data[size - 1] % 4)});
  }
  // As received (checksums most likely wrong after mutation: actions must not care)...
  std::vector<std::uint8_t> frame(data, data + size);
  run_actions(frame, p);
  check_encapsulations(frame, p, size >= 4 ? load_be32(data + size - 4) : 0);
  // ...and with both checksums made right first, so every input also checks that incremental
  // updates equal a full recomputation. (A UDP checksum of 0, "none", is kept as the sender's.)
  if (p.is_v4()) {
    store_be16(frame.data() + p.l3_offset + 10,
               ipv4_header_checksum(frame.data() + p.l3_offset, p.l4_offset - p.l3_offset));
  }
  std::uint8_t* l4_sum = frame.data() + p.l4_checksum_offset();
  if (!(p.protocol == IPPROTO_UDP && load_be16(l4_sum) == 0)) {
    store_be16(l4_sum, l4_checksum(frame, p));
  }
  const ChecksumState fixed = checksums(frame, p);
  FUZZ_CHECK(fixed.ipv4_ok && (fixed.l4_ok || fixed.udp_none));
  run_actions(frame, p);
  return 0;
}
