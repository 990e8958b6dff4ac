// Hand-built frames for the decap program's tests: Ethernet (optionally one 802.1Q tag), IPv4 and
// IPv6 headers, UDP, and the IPIP and GUE variant 1 forms ferry's gateway sends; and a fixture
// with the real program loaded, the GUE port set and the backend's addresses marked local.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/decap/decap_counters.hh"
#include "lib/decap/decap_program.hh"
#include "lib/decap/test_run.hh"

namespace ferry::decap::testing {

using Bytes = std::vector<std::uint8_t>;

inline constexpr std::uint16_t gue_port = 6080;
// The backend (local), the gateway (the outer source), a client and the VIP.
inline constexpr const char* backend4 = "10.0.1.7";
inline constexpr const char* backend6 = "2001:db8:1::7";
inline constexpr const char* gateway4 = "10.0.1.1";
inline constexpr const char* gateway6 = "2001:db8:1::1";
inline constexpr const char* client4 = "192.0.2.10";
inline constexpr const char* client6 = "2001:db8:c::10";
inline constexpr const char* vip4 = "10.0.0.12";
inline constexpr const char* vip6 = "2001:db8:ffff::12";

// An IP header with a correct checksum (IPv4); `payload_bytes` is what follows it.
Bytes ipv4_header(const char* src, const char* dst, std::uint8_t proto, std::size_t payload_bytes,
                  std::uint16_t frag_off = 0);
Bytes ipv6_header(const char* src, const char* dst, std::uint8_t next, std::size_t payload_bytes);
Bytes udp_header(std::uint16_t sport, std::uint16_t dport, std::size_t payload_bytes);

// A whole inner packet: UDP from the client to VIP:53 with `payload`.
Bytes inner_udp4(const std::string& payload = "query");
Bytes inner_udp6(const std::string& payload = "query");

// `payload` behind an Ethernet header of `ethertype` (with a VLAN tag: 0x8100, VLAN 42, then it).
Bytes ethernet(std::uint16_t ethertype, const Bytes& payload, bool vlan = false);
// The inner packet as the program must leave it: the same MACs (and tag), the inner's ethertype.
Bytes expected_frame(const Bytes& inner, bool vlan = false);

// The forms ferry's gateway sends to the backend (outer destination backend4/backend6).
Bytes ipip_over4(const Bytes& inner, const char* dst = backend4, bool vlan = false);
Bytes ipip_over6(const Bytes& inner, const char* dst = backend6);
Bytes gue_over4(const Bytes& inner, const char* dst = backend4, std::uint16_t sport = 40000);
Bytes gue_over6(const Bytes& inner, const char* dst = backend6, std::uint16_t sport = 40000);

Bytes operator+(Bytes a, const Bytes& b);

class DecapProgramTest : public ::testing::Test {
 protected:
  void SetUp() override;
  TestRunResult run(const Bytes& frame);
  // The counters of one slot, summed over CPUs.
  PacketBytes counter(std::uint32_t slot);
  // Every slot's packets.
  std::vector<std::uint64_t> packets();

  std::unique_ptr<DecapProgram> program_;
};

}  // namespace ferry::decap::testing
