// The decap program drops, and counts by reason, every tunnel frame it cannot strip safely:
// truncated or inconsistent outer headers, outer options and fragments, a foreign destination,
// truncated or mislabelled inner packets, GUE that is not variant 1.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <netinet/in.h>

#include "tests/unit/decap/decap_frames.hh"

namespace ferry::decap::testing {
namespace {

class DecapRefusal : public DecapProgramTest {
 protected:
  // Runs `frame`, expects XDP_DROP and exactly one more packet counted, in `reason`.
  void expect_refused(const Bytes& frame, std::uint32_t reason) {
    auto before = packets();
    auto result = run(frame);
    EXPECT_EQ(result.verdict, XDP_DROP) << slot_name(reason);
    auto after = packets();
    before[reason] += 1;
    EXPECT_EQ(after, before) << "expected one more in " << slot_name(reason);
    EXPECT_EQ(counter(reason).bytes > 0, true);
  }
};

Bytes cut(Bytes frame, std::size_t drop_bytes) {
  frame.resize(frame.size() - drop_bytes);
  return frame;
}

TEST_F(DecapRefusal, TruncatedOuter) {
  // The outer lengths claim more than the frame has.
  expect_refused(cut(ipip_over4(inner_udp4()), 3), bpf::FERRY_DECAP_REFUSED_OUTER_TRUNCATED);
  expect_refused(cut(ipip_over6(inner_udp6()), 1), bpf::FERRY_DECAP_REFUSED_OUTER_TRUNCATED);
  expect_refused(cut(gue_over4(inner_udp4()), 5), bpf::FERRY_DECAP_REFUSED_OUTER_TRUNCATED);
  expect_refused(cut(gue_over6(inner_udp6()), 2), bpf::FERRY_DECAP_REFUSED_OUTER_TRUNCATED);
}

TEST_F(DecapRefusal, UdpLengthDisagreeingWithOuterLength) {
  Bytes frame = gue_over4(inner_udp4());
  frame[14 + 20 + 5] += 1;  // UDP length one more than the IPv4 payload
  expect_refused(frame, bpf::FERRY_DECAP_REFUSED_OUTER_TRUNCATED);
}

TEST_F(DecapRefusal, TruncatedInner) {
  // Outer headers consistent, but the payload is shorter than an inner IP header.
  Bytes short4 = inner_udp4();
  short4.resize(12);
  expect_refused(ipip_over4(short4), bpf::FERRY_DECAP_REFUSED_INNER_TRUNCATED);
  Bytes short6 = inner_udp6();
  short6.resize(30);
  expect_refused(gue_over6(short6), bpf::FERRY_DECAP_REFUSED_INNER_TRUNCATED);
  expect_refused(ethernet(ETH_P_IPV6, ipv6_header(gateway6, backend6, IPPROTO_IPV6, 0)),
                 bpf::FERRY_DECAP_REFUSED_INNER_TRUNCATED);
}

TEST_F(DecapRefusal, InnerLengthNotTheOuterPayload) {
  Bytes inner = inner_udp4();
  inner.push_back(0);  // one byte more than the inner IPv4 total length says
  expect_refused(ipip_over4(inner), bpf::FERRY_DECAP_REFUSED_INNER_LENGTH);
  Bytes inner6 = inner_udp6();
  inner6[5] += 4;  // IPv6 payload length beyond the outer payload
  expect_refused(gue_over6(inner6), bpf::FERRY_DECAP_REFUSED_INNER_LENGTH);
  Bytes bad_ihl = inner_udp4();
  bad_ihl[0] = 0x44;  // IHL 4
  expect_refused(gue_over4(bad_ihl), bpf::FERRY_DECAP_REFUSED_INNER_LENGTH);
}

TEST_F(DecapRefusal, InnerVersionNotTheOuterProtocol) {
  Bytes frame = ipip_over4(inner_udp4());
  frame[14 + 9] = IPPROTO_IPV6;  // says IPv6, carries IPv4
  expect_refused(frame, bpf::FERRY_DECAP_REFUSED_VERSION);
  Bytes frame6 = ipip_over6(inner_udp6());
  frame6[14 + 6] = IPPROTO_IPIP;
  expect_refused(frame6, bpf::FERRY_DECAP_REFUSED_VERSION);
}

TEST_F(DecapRefusal, GueThatIsNotVariantOneIp) {
  for (std::uint8_t first : {0x00, 0x20, 0x80, 0xc5, 0x55, 0x70}) {
    Bytes inner = inner_udp4();
    inner[0] = first;  // variant 0 (a GUE header), variants 2 and 3, version nibbles 5 and 7
    expect_refused(gue_over4(inner), bpf::FERRY_DECAP_REFUSED_GUE_VARIANT);
  }
}

TEST_F(DecapRefusal, OuterFragment) {
  Bytes inner = inner_udp4();
  for (std::uint16_t frag_off : {0x2000, 0x0010}) {  // more fragments; a later fragment
    expect_refused(
        ethernet(ETH_P_IP,
                 ipv4_header(gateway4, backend4, IPPROTO_IPIP, inner.size(), frag_off) + inner),
        bpf::FERRY_DECAP_REFUSED_OUTER_FRAGMENT);
  }
  expect_refused(
      ethernet(ETH_P_IP, ipv4_header(gateway4, backend4, IPPROTO_UDP, 8 + inner.size(), 0x2000) +
                             udp_header(1, gue_port, inner.size()) + inner),
      bpf::FERRY_DECAP_REFUSED_OUTER_FRAGMENT);
  Bytes frag6 = {IPPROTO_IPIP, 0, 0x00, 0x01, 0, 0, 0, 7};  // offset 0, more fragments
  expect_refused(
      ethernet(ETH_P_IPV6, ipv6_header(gateway6, backend6, 44, 8 + inner.size()) + frag6 + inner),
      bpf::FERRY_DECAP_REFUSED_OUTER_FRAGMENT);
}

TEST_F(DecapRefusal, OuterIpv4Options) {
  Bytes inner = inner_udp4();
  Bytes outer = ipv4_header(gateway4, backend4, IPPROTO_IPIP, inner.size() + 4);
  outer[0] = 0x46;
  outer.insert(outer.end(), {1, 1, 1, 0});  // four NOP/EOL option bytes
  expect_refused(ethernet(ETH_P_IP, outer + inner), bpf::FERRY_DECAP_REFUSED_OUTER_OPTIONS);
}

TEST_F(DecapRefusal, ForeignOuterDestination) {
  expect_refused(ipip_over4(inner_udp4(), "10.0.1.8"), bpf::FERRY_DECAP_REFUSED_NOT_LOCAL);
  expect_refused(gue_over4(inner_udp4(), "10.0.1.8"), bpf::FERRY_DECAP_REFUSED_NOT_LOCAL);
  expect_refused(ipip_over6(inner_udp6(), "2001:db8:1::8"), bpf::FERRY_DECAP_REFUSED_NOT_LOCAL);
  expect_refused(gue_over6(inner_udp6(), "2001:db8:1::8"), bpf::FERRY_DECAP_REFUSED_NOT_LOCAL);
}

TEST_F(DecapRefusal, NothingStrippedOrPassedOnRefusal) {
  run(ipip_over4(inner_udp4(), "10.0.1.8"));
  run(cut(gue_over6(inner_udp6()), 1));
  auto all = packets();
  for (std::uint32_t slot = 0; slot <= bpf::FERRY_DECAP_PASSED; ++slot) EXPECT_EQ(all[slot], 0u);
  EXPECT_EQ(all[bpf::FERRY_DECAP_REFUSED_NOT_LOCAL], 1u);
  EXPECT_EQ(all[bpf::FERRY_DECAP_REFUSED_OUTER_TRUNCATED], 1u);
}

}  // namespace
}  // namespace ferry::decap::testing
