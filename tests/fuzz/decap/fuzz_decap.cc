// libFuzzer target for ferry-decap's XDP program (bpf/ferry_decap.bpf.c), run in the kernel by
// BPF_PROG_TEST_RUN: any bytes, behind an Ethernet header the first byte chooses or as they are,
// must come back XDP_PASS or XDP_DROP, never longer; a frame passed as a tunnel must be exactly the
// input's inner packet behind the input's own Ethernet header (and VLAN tag) with the inner
// family's ethertype, a frame passed as no tunnel exactly the input, and every verdict must be
// counted in one slot. Root (CAP_BPF). Built and run by `make fuzz` (docs/testing.md).
#include <arpa/inet.h>
#include <linux/bpf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lib/decap/decap_counters.hh"
#include "lib/decap/decap_program.hh"
#include "lib/decap/local_addresses.hh"
#include "lib/decap/test_run.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry::decap;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint16_t gue_port = 6080;
constexpr std::size_t max_frame = 2048;  // within BPF_PROG_TEST_RUN's page less head/tailroom

// The program with the seed corpus's backend addresses local (10.0.1.7, 2001:db8:1::7).
DecapProgram& program() {
  static DecapProgram* p = [] {
    auto* loaded = new DecapProgram();
    ferry::bpf::ferry_decap_config config{};
    config.gue_port = htons(gue_port);
    write_config(loaded->map_fd(config_map), config);
    ferry::bpf::ferry_decap_addr_key v4{}, v6{};
    v4.family = AF_INET;
    inet_pton(AF_INET, "10.0.1.7", v4.addr);
    v6.family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8:1::7", v6.addr);
    write_local_addresses(loaded->map_fd(local_addrs_map), {v4, v6});
    return loaded;
  }();
  return *p;
}

std::uint16_t get16(const Bytes& b, std::size_t at) {
  return static_cast<std::uint16_t>(b[at] << 8 | b[at + 1]);
}

// Mode byte: bit 0 set = the bytes as they are; else an Ethernet header with the ethertype that
// bits 1-2 choose (IPv4, IPv6, 802.1Q then IPv4, 802.1Q then IPv6).
Bytes make_frame(std::uint8_t mode, const std::uint8_t* data, std::size_t size) {
  Bytes frame;
  if (!(mode & 1)) {
    frame = {0x02, 0, 0, 0, 0, 0x07, 0x02, 0, 0, 0, 0, 0x01};
    unsigned kind = (mode >> 1) & 3;
    if (kind >= 2) frame.insert(frame.end(), {0x81, 0x00, 0x00, 0x2a});
    if (kind % 2 == 0) {
      frame.insert(frame.end(), {0x08, 0x00});
    } else {
      frame.insert(frame.end(), {0x86, 0xdd});
    }
  }
  frame.insert(frame.end(), data, data + size);
  if (frame.size() < 14) frame.resize(14, 0);  // BPF_PROG_TEST_RUN's minimum
  if (frame.size() > max_frame) frame.resize(max_frame);
  return frame;
}

// The frame a strip counted in `slot` must leave: the input's L2 header with the inner ethertype,
// then the inner packet, as long as it says it is.
Bytes expected_strip(const Bytes& in, std::uint32_t slot) {
  std::size_t l2 = get16(in, 12) == 0x8100 ? 18 : 14;
  bool outer6 = slot == ferry::bpf::FERRY_DECAP_IPIP4_IN_6 ||
                slot == ferry::bpf::FERRY_DECAP_IPIP6_IN_6 ||
                slot == ferry::bpf::FERRY_DECAP_GUE_IN_6;
  bool gue = slot == ferry::bpf::FERRY_DECAP_GUE_IN_4 || slot == ferry::bpf::FERRY_DECAP_GUE_IN_6;
  std::size_t inner = l2 + (outer6 ? 40 : 20) + (gue ? 8 : 0);
  FUZZ_CHECK(inner + 40 <= in.size() || inner + 20 <= in.size());
  bool inner4 = (in[inner] >> 4) == 4;
  std::size_t inner_len = inner4 ? get16(in, inner + 2) : 40 + get16(in, inner + 4);
  FUZZ_CHECK(inner + inner_len <= in.size());
  Bytes out(in.begin(), in.begin() + static_cast<long>(l2));
  out[l2 - 2] = inner4 ? 0x08 : 0x86;
  out[l2 - 1] = inner4 ? 0x00 : 0xdd;
  out.insert(out.end(), in.begin() + static_cast<long>(inner),
             in.begin() + static_cast<long>(inner + inner_len));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  Bytes in = make_frame(data[0], data + 1, size - 1);
  DecapProgram& prog = program();
  int counters_fd = prog.map_fd(counters_map);
  DecapCounters before = read_counters(counters_fd);
  TestRunResult result = run_frame(prog.program_fd(), in);
  DecapCounters after = read_counters(counters_fd);

  FUZZ_CHECK(result.verdict == XDP_PASS || result.verdict == XDP_DROP);
  FUZZ_CHECK(result.frame.size() <= in.size());
  std::uint32_t counted = 0, slot = 0;
  for (std::uint32_t s = 0; s < after.size(); ++s) {
    std::uint64_t delta = after[s].packets - before[s].packets;
    FUZZ_CHECK(delta <= 1);
    if (delta == 1) {
      ++counted;
      slot = s;
      FUZZ_CHECK(after[s].bytes - before[s].bytes == in.size());
    }
  }
  FUZZ_CHECK(counted == 1);
  if (result.verdict == XDP_DROP) {
    FUZZ_CHECK(is_refused(slot));
  } else if (slot == ferry::bpf::FERRY_DECAP_PASSED) {
    FUZZ_CHECK(result.frame == in);
  } else {
    FUZZ_CHECK(is_stripped(slot));
    FUZZ_CHECK(result.frame == expected_strip(in, slot));
  }
  return 0;
}
