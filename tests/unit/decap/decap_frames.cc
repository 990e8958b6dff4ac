// Hand-built frames for the decap program's tests, and the fixture that loads the program.
#include "tests/unit/decap/decap_frames.hh"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <netinet/in.h>

#include <stdexcept>

#include "lib/decap/local_addresses.hh"

namespace ferry::decap::testing {
namespace {

void put16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v >> 8);
  b[at + 1] = static_cast<std::uint8_t>(v);
}

void put_address(Bytes& b, std::size_t at, int family, const char* text) {
  std::uint8_t addr[16];
  if (inet_pton(family, text, addr) != 1) throw std::invalid_argument(text);
  std::copy(addr, addr + (family == AF_INET ? 4 : 16), b.begin() + static_cast<long>(at));
}

std::uint16_t header_checksum(const Bytes& header) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < header.size(); i += 2) sum += header[i] << 8 | header[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

bpf::ferry_decap_addr_key key_of(int family, const char* text) {
  bpf::ferry_decap_addr_key key{};
  key.family = static_cast<std::uint32_t>(family);
  inet_pton(family, text, key.addr);
  return key;
}

}  // namespace

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes ipv4_header(const char* src, const char* dst, std::uint8_t proto, std::size_t payload_bytes,
                  std::uint16_t frag_off) {
  Bytes h(20, 0);
  h[0] = 0x45;
  put16(h, 2, static_cast<std::uint16_t>(20 + payload_bytes));
  put16(h, 4, 0x1234);
  put16(h, 6, frag_off);
  h[8] = 64;
  h[9] = proto;
  put_address(h, 12, AF_INET, src);
  put_address(h, 16, AF_INET, dst);
  put16(h, 10, header_checksum(h));
  return h;
}

Bytes ipv6_header(const char* src, const char* dst, std::uint8_t next, std::size_t payload_bytes) {
  Bytes h(40, 0);
  h[0] = 0x60;
  put16(h, 4, static_cast<std::uint16_t>(payload_bytes));
  h[6] = next;
  h[7] = 64;
  put_address(h, 8, AF_INET6, src);
  put_address(h, 24, AF_INET6, dst);
  return h;
}

Bytes udp_header(std::uint16_t sport, std::uint16_t dport, std::size_t payload_bytes) {
  Bytes h(8, 0);
  put16(h, 0, sport);
  put16(h, 2, dport);
  put16(h, 4, static_cast<std::uint16_t>(8 + payload_bytes));
  return h;  // checksum 0: none over IPv4; the program never reads it
}

Bytes inner_udp4(const std::string& payload) {
  Bytes data(payload.begin(), payload.end());
  return ipv4_header(client4, vip4, IPPROTO_UDP, 8 + data.size()) +
         udp_header(5353, 53, data.size()) + data;
}

Bytes inner_udp6(const std::string& payload) {
  Bytes data(payload.begin(), payload.end());
  return ipv6_header(client6, vip6, IPPROTO_UDP, 8 + data.size()) +
         udp_header(5353, 53, data.size()) + data;
}

Bytes ethernet(std::uint16_t ethertype, const Bytes& payload, bool vlan) {
  Bytes h = {0x02, 0, 0, 0, 0, 0x07, 0x02, 0, 0, 0, 0, 0x01};
  if (vlan) h.insert(h.end(), {0x81, 0x00, 0x00, 42});
  h.insert(h.end(),
           {static_cast<std::uint8_t>(ethertype >> 8), static_cast<std::uint8_t>(ethertype)});
  return h + payload;
}

Bytes expected_frame(const Bytes& inner, bool vlan) {
  return ethernet((inner[0] >> 4) == 4 ? ETH_P_IP : ETH_P_IPV6, inner, vlan);
}

Bytes ipip_over4(const Bytes& inner, const char* dst, bool vlan) {
  std::uint8_t proto = (inner[0] >> 4) == 4 ? IPPROTO_IPIP : IPPROTO_IPV6;
  return ethernet(ETH_P_IP, ipv4_header(gateway4, dst, proto, inner.size()) + inner, vlan);
}

Bytes ipip_over6(const Bytes& inner, const char* dst) {
  std::uint8_t next = (inner[0] >> 4) == 4 ? IPPROTO_IPIP : IPPROTO_IPV6;
  return ethernet(ETH_P_IPV6, ipv6_header(gateway6, dst, next, inner.size()) + inner);
}

Bytes gue_over4(const Bytes& inner, const char* dst, std::uint16_t sport) {
  return ethernet(ETH_P_IP, ipv4_header(gateway4, dst, IPPROTO_UDP, 8 + inner.size()) +
                                udp_header(sport, gue_port, inner.size()) + inner);
}

Bytes gue_over6(const Bytes& inner, const char* dst, std::uint16_t sport) {
  return ethernet(ETH_P_IPV6, ipv6_header(gateway6, dst, IPPROTO_UDP, 8 + inner.size()) +
                                  udp_header(sport, gue_port, inner.size()) + inner);
}

void DecapProgramTest::SetUp() {
  program_ = std::make_unique<DecapProgram>();
  bpf::ferry_decap_config config{};
  config.gue_port = htons(gue_port);
  write_config(program_->map_fd(config_map), config);
  write_local_addresses(program_->map_fd(local_addrs_map),
                        {key_of(AF_INET, backend4), key_of(AF_INET6, backend6)});
}

TestRunResult DecapProgramTest::run(const Bytes& frame) {
  return run_frame(program_->program_fd(), frame);
}

PacketBytes DecapProgramTest::counter(std::uint32_t slot) {
  return read_counters(program_->map_fd(counters_map))[slot];
}

std::vector<std::uint64_t> DecapProgramTest::packets() {
  std::vector<std::uint64_t> out;
  for (const auto& c : read_counters(program_->map_fd(counters_map))) out.push_back(c.packets);
  return out;
}

}  // namespace ferry::decap::testing
