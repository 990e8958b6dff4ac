// What `ferryctl top` shows, computed from one `services` answer and one `stats` snapshot with
// its counter rates: a row per (service, protocol) with its traffic each way, active flows or
// connections, drops and errors by reason, its backends, and the fast path's own drops.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/ctl/series.hh"

namespace ferry::ctl {

// Each figure is empty where ferryd has no counter for it (TCP has no packet counts, UDP no
// connections) or no rate yet; "in" is towards the backends, "out" back to the clients.
struct TopFigures {
  std::optional<double> in_pps, in_bps, out_pps, out_bps;
  std::optional<double> active;  // open proxied (or echoed) connections
  std::optional<double> drops_per_second, errors_per_second;
  std::map<std::string, double> drops_by_reason, errors_by_reason;  // per second
};

struct TopBackend {
  std::string address;
  std::string state;  // up, down, unknown (no check finished yet), unchecked (no health checks)
  std::string admin;  // enabled, drain, disabled (ferryctl backend); empty if ferryd says none
  std::optional<double> weight;
  TopFigures figures;
};

struct TopRow {
  std::string service;
  // udp, tcp; "udp,tcp" for an encapsulating service that takes both (counted together)
  std::string protocol;
  std::string endpoint;  // VIP:PORT ([v6]:PORT)
  // fastpath, proxy, echo; "fastpath reflect" for a reflect service, "fastpath ipip" / "fastpath
  // gue" for an encapsulating one (direct server return)
  std::string path;
  std::optional<int> backends_up, backends_total;  // empty for a service without backends
  TopFigures figures;
  std::vector<TopBackend> backends;
};

enum class TopSort {
  traffic,  // busiest first (bits/s both ways), then by name
  name,
};

struct TopView {
  std::vector<TopRow> rows;
  // What the whole gateway carries (the header); traffic.fastpath says there is a fast path.
  Traffic traffic;
  // Frames the fast path dropped, not attributed to a service: the workers' reasons, the
  // kernel's (AF_XDP rings full, "kernel_" + reason) and the XDP program's drop prefixes.
  TopFigures fastpath_drops;
};

TopView build_top_view(const nlohmann::json& services_result, const StatsIndex& stats,
                       TopSort sort);

}  // namespace ferry::ctl
