// The decap program strips each of ferry's six tunnel forms to exactly the inner frame, and
// passes every frame that is not one untouched, counting both.
#include "tests/unit/decap/decap_frames.hh"

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <netinet/in.h>

namespace ferry::decap::testing {
namespace {

using bpf::ferry_decap_counter_slot;

class DecapStrip : public DecapProgramTest {
 protected:
  // Runs `frame`, expects it stripped to `inner` and counted in `slot` with its arrival bytes.
  void expect_stripped(const Bytes& frame, const Bytes& inner, std::uint32_t slot,
                       bool vlan = false) {
    auto before = counter(slot);
    auto result = run(frame);
    EXPECT_EQ(result.verdict, XDP_PASS);
    EXPECT_EQ(result.frame, expected_frame(inner, vlan));
    std::size_t type_at = vlan ? 16 : 12;
    ASSERT_GE(result.frame.size(), type_at + 2);
    std::uint16_t ethertype =
        static_cast<std::uint16_t>(result.frame[type_at] << 8 | result.frame[type_at + 1]);
    EXPECT_EQ(ethertype, (inner[0] >> 4) == 4 ? ETH_P_IP : ETH_P_IPV6);
    EXPECT_EQ(counter(slot).packets, before.packets + 1);
    EXPECT_EQ(counter(slot).bytes, before.bytes + frame.size());
  }

  void expect_passed_untouched(const Bytes& frame) {
    auto before = counter(bpf::FERRY_DECAP_PASSED);
    auto result = run(frame);
    EXPECT_EQ(result.verdict, XDP_PASS);
    EXPECT_EQ(result.frame, frame);
    EXPECT_EQ(counter(bpf::FERRY_DECAP_PASSED).packets, before.packets + 1);
    EXPECT_EQ(counter(bpf::FERRY_DECAP_PASSED).bytes, before.bytes + frame.size());
  }
};

TEST_F(DecapStrip, Ipip4In4) {
  expect_stripped(ipip_over4(inner_udp4()), inner_udp4(), bpf::FERRY_DECAP_IPIP4_IN_4);
}

TEST_F(DecapStrip, Ipip6In4) {
  expect_stripped(ipip_over4(inner_udp6()), inner_udp6(), bpf::FERRY_DECAP_IPIP6_IN_4);
}

TEST_F(DecapStrip, Ipip4In6) {
  expect_stripped(ipip_over6(inner_udp4()), inner_udp4(), bpf::FERRY_DECAP_IPIP4_IN_6);
}

TEST_F(DecapStrip, Ipip6In6) {
  expect_stripped(ipip_over6(inner_udp6()), inner_udp6(), bpf::FERRY_DECAP_IPIP6_IN_6);
}

TEST_F(DecapStrip, GueOver4CarriesEitherFamily) {
  expect_stripped(gue_over4(inner_udp4()), inner_udp4(), bpf::FERRY_DECAP_GUE_IN_4);
  expect_stripped(gue_over4(inner_udp6()), inner_udp6(), bpf::FERRY_DECAP_GUE_IN_4);
  EXPECT_EQ(counter(bpf::FERRY_DECAP_GUE_IN_4).packets, 2u);
}

TEST_F(DecapStrip, GueOver6CarriesEitherFamily) {
  expect_stripped(gue_over6(inner_udp6()), inner_udp6(), bpf::FERRY_DECAP_GUE_IN_6);
  expect_stripped(gue_over6(inner_udp4()), inner_udp4(), bpf::FERRY_DECAP_GUE_IN_6);
}

TEST_F(DecapStrip, AnyGueSourcePortIsStripped) {
  for (std::uint16_t sport : {1, 6080, 40000, 65535}) {
    expect_stripped(gue_over4(inner_udp4(), backend4, sport), inner_udp4(),
                    bpf::FERRY_DECAP_GUE_IN_4);
  }
}

TEST_F(DecapStrip, KeepsTheVlanTag) {
  expect_stripped(ipip_over4(inner_udp4(), backend4, true), inner_udp4(),
                  bpf::FERRY_DECAP_IPIP4_IN_4, true);
}

TEST_F(DecapStrip, TrimsBytesAfterTheOuterPacket) {
  // Ethernet padding (or any trailer) after what the outer length covers is not the inner's.
  Bytes inner = inner_udp4("");
  Bytes frame = ipip_over4(inner);
  frame.resize(frame.size() + 6, 0);
  expect_stripped(frame, inner, bpf::FERRY_DECAP_IPIP4_IN_4);
  Bytes frame6 = gue_over6(inner);
  frame6.resize(frame6.size() + 2, 0xee);
  expect_stripped(frame6, inner, bpf::FERRY_DECAP_GUE_IN_6);
}

TEST_F(DecapStrip, LargeInnerPacketIsStrippedWhole) {
  Bytes inner = inner_udp4(std::string(1400, 'x'));
  expect_stripped(gue_over6(inner), inner, bpf::FERRY_DECAP_GUE_IN_6);
}

TEST_F(DecapStrip, PlainUdpToAnotherPortPassesUntouched) {
  expect_passed_untouched(ethernet(ETH_P_IP, inner_udp4()));
  expect_passed_untouched(ethernet(ETH_P_IPV6, inner_udp6()));
  Bytes data = {1, 2, 3, 4};
  expect_passed_untouched(ethernet(ETH_P_IP, ipv4_header(gateway4, backend4, IPPROTO_UDP, 12) +
                                                 udp_header(6080, 6081, 4) + data));
}

TEST_F(DecapStrip, ArpPassesUntouched) {
  Bytes arp = {0,  1, 8, 0, 6, 4, 0, 1, 2, 0, 0,  0, 0, 1,
               10, 0, 1, 1, 0, 0, 0, 0, 0, 0, 10, 0, 1, 7};
  expect_passed_untouched(ethernet(ETH_P_ARP, arp));
}

TEST_F(DecapStrip, TcpPassesUntouched) {
  Bytes tcp(20, 0);
  tcp[0] = 0x17, tcp[1] = 0xc0;  // port 6080 as the source: still not GUE
  tcp[2] = 0, tcp[3] = 80, tcp[12] = 0x50, tcp[13] = 0x02;
  expect_passed_untouched(
      ethernet(ETH_P_IP, ipv4_header(client4, backend4, IPPROTO_TCP, 20) + tcp));
  expect_passed_untouched(
      ethernet(ETH_P_IPV6, ipv6_header(client6, backend6, IPPROTO_TCP, 20) + tcp));
}

TEST_F(DecapStrip, LaterFragmentOfUdpPassesUntouched) {
  // No ports to tell GUE by: the stack reassembles (and nothing listens on the GUE port).
  Bytes data(16, 0x41);
  expect_passed_untouched(
      ethernet(ETH_P_IP, ipv4_header(gateway4, backend4, IPPROTO_UDP, 16, 0x0003) + data));
}

TEST_F(DecapStrip, TooShortForAnIpHeaderPassesUntouched) {
  expect_passed_untouched(ethernet(ETH_P_IP, Bytes{0x45, 0, 0}));
  expect_passed_untouched(ethernet(ETH_P_IPV6, Bytes(20, 0x60)));
  expect_passed_untouched(Bytes(14, 0));
}

TEST_F(DecapStrip, CountsEachKindApart) {
  run(ipip_over4(inner_udp4()));
  run(ipip_over4(inner_udp4()));
  run(gue_over6(inner_udp6()));
  run(ethernet(ETH_P_IP, inner_udp4()));
  std::vector<std::uint64_t> expected(bpf::FERRY_DECAP_COUNTER_COUNT, 0);
  expected[bpf::FERRY_DECAP_IPIP4_IN_4] = 2;
  expected[bpf::FERRY_DECAP_GUE_IN_6] = 1;
  expected[bpf::FERRY_DECAP_PASSED] = 1;
  EXPECT_EQ(packets(), expected);
}

TEST_F(DecapStrip, WithoutGuePortUdpToItPasses) {
  bpf::ferry_decap_config config{};
  write_config(program_->map_fd(config_map), config);
  expect_passed_untouched(gue_over4(inner_udp4()));
}

}  // namespace
}  // namespace ferry::decap::testing
