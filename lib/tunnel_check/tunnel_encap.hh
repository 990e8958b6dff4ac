// ferryd's health-check tunnel: bpf/ferry_hc.bpf.c loaded from its skeleton, its maps written
// from the tunnel marks, and attached at TC egress of the fast path's interfaces, where checks to
// an encapsulating service's VIP leave (docs/health.md, "Encapsulating services").
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bpf/ferry_hc_shared.h"
#include "lib/metrics/registry.hh"
#include "lib/tunnel_check/clsact_filter.hh"

struct ferry_hc_bpf;  // the bpftool skeleton

namespace ferry::tunnel_check {

// The counter slots' names: `result` label of ferry_health_tunnel_packets_total (the first
// FERRY_HC_RESULT_COUNT), then `by` of ferry_health_tunnel_routed_packets_total.
extern const std::array<const char*, bpf::FERRY_HC_COUNTER_COUNT> kCounterNames;

class TunnelEncap {
 public:
  // Loads the program (no attachment yet) and registers its counters. Throws
  // std::runtime_error with the reason.
  explicit TunnelEncap(metrics::Registry& registry);
  // Detaches every filter (removing the qdiscs it created), then unloads.
  ~TunnelEncap();
  TunnelEncap(const TunnelEncap&) = delete;
  TunnelEncap& operator=(const TunnelEncap&) = delete;

  // Makes the map hold exactly `entries` and the program sit at the egress of exactly
  // `interfaces` (at most FERRY_HC_MAX_INTERFACES): entries first, so no packet meets a filter
  // without its tunnel. `qdiscs_ours`: interfaces whose clsact qdisc a ferryd this one took over
  // created. Throws std::runtime_error naming the interface that failed.
  void apply(const std::map<std::uint32_t, bpf::ferry_hc_tunnel>& entries,
             const std::vector<std::string>& interfaces,
             const std::set<std::string>& qdiscs_ours = {});
  // The interfaces the program is attached to, each with whether this ferryd (or one it took
  // over from) created its clsact qdisc: what a successor removes at its stop, or at its start
  // if it does not attach there.
  std::vector<std::pair<std::string, bool>> attachments() const;
  std::vector<std::string> created_qdiscs() const;
  // Handed over: the filters and qdiscs stay for the successor, which replaced the program.
  void leave() noexcept;

  int program_fd() const;
  std::map<std::uint32_t, bpf::ferry_hc_tunnel> read_entries() const;
  std::array<bpf::ferry_hc_counter, bpf::FERRY_HC_COUNTER_COUNT> read_counters() const;

 private:
  int map_fd(const char* name) const;
  void collect(metrics::SnapshotBuilder& out) const;

  ferry_hc_bpf* skeleton_ = nullptr;
  std::map<std::string, std::unique_ptr<ClsactFilter>> filters_;
  metrics::Registry::Handle metrics_;
};

}  // namespace ferry::tunnel_check
