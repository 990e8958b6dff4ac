// The health-check tunnel program, frame by frame through BPF_PROG_TEST_RUN: every inner family in
// every tunnel comes out byte for byte as lib/packet/encap.cc's encapsulate() writes it for the
// worker (with the program's flow hash and IPv4 ID read back), GUE over IPv6 with the same full
// checksum also when the inner checksum is left partial; unmarked packets pass untouched, unknown
// marks and packets no check sends are dropped and counted; the map holds what apply() wrote.
// Root (CAP_BPF, CAP_NET_ADMIN): skipped otherwise.
#include "lib/tunnel_check/tunnel_encap.hh"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <linux/pkt_cls.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "lib/packet/encap.hh"
#include "lib/tunnel_check/tunnel_entries.hh"
#include "tests/unit/packet/frame_builder.hh"
#include "tests/unit/packet/vectors.hh"

namespace ferry::tunnel_check {
namespace {

using Bytes = std::vector<std::uint8_t>;
using packet::test::addr;

net::IpAddress ip(const char* text) {
  return *net::IpAddress::parse(text);
}

const char* backend(bool outer_v6) {
  return outer_v6 ? "2001:db8:1::7" : "10.0.1.7";
}

config::EncapConfig encap() {
  config::EncapConfig e;
  e.source = ip("10.0.0.1");
  e.source6 = ip("2001:db8::a");
  e.gue_port = 6080;
  return e;
}

struct ProgramRun {
  int verdict = -1;
  Bytes frame;
};

class TunnelEncapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (CAP_BPF) to load the program";
    program_ = std::make_unique<TunnelEncap>(registry_);
    for (auto kind : {config::Forwarding::ipip, config::Forwarding::gue}) {
      for (bool v6 : {false, true}) keys_.insert({kind, ip(backend(v6))});
    }
    marks_.assign(keys_);
    program_->apply(tunnel_entries(marks_, encap()), {});
  }

  std::uint32_t mark(config::Forwarding kind, bool outer_v6) {
    return *marks_.mark_of({kind, ip(backend(outer_v6))});
  }

  ProgramRun run(const Bytes& frame, std::uint32_t mark) {
    ProgramRun r;
    r.frame.resize(frame.size() + 128);
    __sk_buff ctx{};
    ctx.mark = mark;
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = r.frame.data(),
                .data_size_in = static_cast<__u32>(frame.size()),
                .data_size_out = static_cast<__u32>(r.frame.size()), .ctx_in = &ctx,
                .ctx_size_in = sizeof(ctx), .repeat = 1);
    EXPECT_EQ(bpf_prog_test_run_opts(program_->program_fd(), &opts), 0) << std::strerror(errno);
    r.verdict = static_cast<int>(opts.retval);
    r.frame.resize(opts.data_size_out);
    return r;
  }

  // What the worker sends for `frame` in this tunnel, with the flow hash and IPv4 ID the program
  // chose (read from its output: they are the only bytes it may choose).
  static Bytes worker_frame(const Bytes& frame, config::Forwarding kind, bool outer_v6,
                            const Bytes& out) {
    packet::EncapHeader h;
    h.kind = kind == config::Forwarding::gue ? packet::EncapKind::gue : packet::EncapKind::ipip;
    h.source = outer_v6 ? *encap().source6 : *encap().source;
    h.destination = ip(backend(outer_v6));
    h.gue_port = encap().gue_port;
    if (outer_v6) {
      h.flow_hash = (std::uint32_t{out[15]} & 0x0f) << 16 | std::uint32_t{out[16]} << 8 | out[17];
    } else {
      h.ip_id = static_cast<std::uint16_t>(out[18] << 8 | out[19]);
      if (h.kind == packet::EncapKind::gue) h.flow_hash = (out[34] << 8 | out[35]) & 0x3fffu;
    }
    constexpr std::uint32_t kHeadroom = 128;
    Bytes room(kHeadroom, 0);
    room.insert(room.end(), frame.begin(), frame.end());
    packet::ParsedPacket p;
    EXPECT_EQ(packet::parse_frame(frame, p), packet::ParseError::none);
    auto result = packet::encapsulate(room, kHeadroom, p, h);
    EXPECT_TRUE(result.ok()) << packet::to_string(result.error);
    auto bytes = result.frame(room);
    return Bytes(bytes.begin(), bytes.end());
  }

  metrics::Registry registry_;
  std::unique_ptr<TunnelEncap> program_;
  std::set<health::TunnelKey> keys_;
  health::TunnelMarks marks_;
};

TEST_F(TunnelEncapTest, EveryInnerFamilyInEveryTunnelIsWhatTheWorkerSends) {
  const std::pair<const char*, const Bytes*> inners[] = {{"udp4", &packet::test::kUdp4},
                                                         {"tcp4", &packet::test::kTcp4},
                                                         {"udp6", &packet::test::kUdp6}};
  for (auto kind : {config::Forwarding::ipip, config::Forwarding::gue}) {
    for (bool outer_v6 : {false, true}) {
      for (const auto& [name, frame] : inners) {
        SCOPED_TRACE(std::string(config::to_string(kind)) +
                     (outer_v6 ? " over IPv6, " : " over IPv4, ") + name);
        ProgramRun r = run(*frame, mark(kind, outer_v6));
        // Redirected, or dropped for want of a route out of the test's loopback: the bytes are
        // the encapsulated packet either way.
        EXPECT_TRUE(r.verdict == TC_ACT_REDIRECT || r.verdict == TC_ACT_SHOT) << r.verdict;
        EXPECT_EQ(r.frame, worker_frame(*frame, kind, outer_v6, r.frame));
      }
    }
  }
  auto counters = program_->read_counters();
  EXPECT_EQ(counters[bpf::FERRY_HC_DROP_NO_TUNNEL].packets, 0u);
  EXPECT_EQ(counters[bpf::FERRY_HC_DROP_NOT_IP].packets, 0u);
  EXPECT_EQ(counters[bpf::FERRY_HC_DROP_ADJUST].packets, 0u);
}

TEST_F(TunnelEncapTest, GueOverIpv6HasTheFullChecksumWhenTheInnerOneIsLeftPartial) {
  for (std::uint8_t protocol : {std::uint8_t{IPPROTO_TCP}, std::uint8_t{IPPROTO_UDP}}) {
    packet::test::FrameSpec spec;
    spec.version = packet::IpVersion::v6;
    spec.src = addr("2001:db8::1");
    spec.dst = addr("2001:db8:ffff::10");
    spec.protocol = protocol;
    spec.payload = Bytes(100, 0x5a);
    Bytes complete = packet::test::build_frame(spec).bytes;
    spec.partial_checksum = true;
    Bytes partial = packet::test::build_frame(spec).bytes;
    ASSERT_NE(complete, partial);
    ProgramRun r = run(partial, mark(config::Forwarding::gue, true));
    Bytes want = worker_frame(complete, config::Forwarding::gue, true, r.frame);
    ASSERT_EQ(r.frame.size(), want.size());
    // The outer UDP checksum (after Ethernet 14, IPv6 40, at 6 into UDP) is the one the packet
    // will have once the NIC (or the stack) finishes the inner checksum.
    EXPECT_EQ(r.frame[60], want[60]) << int(protocol);
    EXPECT_EQ(r.frame[61], want[61]) << int(protocol);
  }
}

TEST_F(TunnelEncapTest, UnmarkedPacketsPassUntouchedAndUnknownMarksAreDropped) {
  ProgramRun plain = run(packet::test::kUdp4, 0);
  EXPECT_EQ(plain.verdict, TC_ACT_OK);
  EXPECT_EQ(plain.frame, packet::test::kUdp4);
  ProgramRun other = run(packet::test::kUdp4, 0x12340001);  // someone else's mark
  EXPECT_EQ(other.verdict, TC_ACT_OK);
  ProgramRun unknown = run(packet::test::kUdp4, health::kTunnelMarkBase | 0x0fff);
  EXPECT_EQ(unknown.verdict, TC_ACT_SHOT);
  EXPECT_EQ(unknown.frame, packet::test::kUdp4);  // never sent bare
  ProgramRun options = run(packet::test::kUdp4Ihl6, mark(config::Forwarding::ipip, false));
  EXPECT_EQ(options.verdict, TC_ACT_SHOT);
  auto counters = program_->read_counters();
  EXPECT_EQ(counters[bpf::FERRY_HC_DROP_NO_TUNNEL].packets, 1u);
  EXPECT_EQ(counters[bpf::FERRY_HC_DROP_NOT_IP].packets, 1u);
}

TEST_F(TunnelEncapTest, TheMapHoldsExactlyWhatTheLastApplyWrote) {
  EXPECT_EQ(program_->read_entries().size(), 4u);
  health::TunnelMarks fewer = marks_;
  fewer.assign({{config::Forwarding::gue, ip(backend(true))}});
  program_->apply(tunnel_entries(fewer, encap()), {});
  auto entries = program_->read_entries();
  ASSERT_EQ(entries.size(), 1u);
  const auto& [mark, t] = *entries.begin();
  EXPECT_EQ(mark, *fewer.mark_of({config::Forwarding::gue, ip(backend(true))}));
  EXPECT_EQ(t.kind, bpf::FERRY_HC_GUE);
  EXPECT_EQ(t.gue_port, htons(6080));
}

}  // namespace
}  // namespace ferry::tunnel_check
