// The decap program's per-CPU counters, summed, and the names status gives their slots.
#include "lib/decap/decap_counters.hh"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry::decap {

DecapCounters read_counters(int counters_fd) {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) throw std::runtime_error("counting the possible CPUs failed");
  DecapCounters totals{};
  std::vector<bpf::ferry_decap_counter> per_cpu(static_cast<std::size_t>(cpus));
  for (std::uint32_t slot = 0; slot < totals.size(); ++slot) {
    if (bpf_map_lookup_elem(counters_fd, &slot, per_cpu.data()) != 0) {
      throw std::runtime_error(std::string("reading the decap counters failed: ") +
                               std::strerror(errno));
    }
    for (const auto& c : per_cpu) {
      totals[slot].packets += c.packets;
      totals[slot].bytes += c.bytes;
    }
  }
  return totals;
}

std::string_view slot_name(std::uint32_t slot) {
  static constexpr std::string_view names[bpf::FERRY_DECAP_COUNTER_COUNT] = {
      "ipip4_in_4",    "ipip6_in_4",       "ipip4_in_6",  "ipip6_in_6",
      "gue_in_4",      "gue_in_6",         "passed",      "outer_truncated",
      "outer_options", "outer_fragment",   "not_local",   "inner_truncated",
      "inner_length",  "version_mismatch", "gue_variant", "adjust_failed"};
  return slot < bpf::FERRY_DECAP_COUNTER_COUNT ? names[slot] : "unknown";
}

}  // namespace ferry::decap
