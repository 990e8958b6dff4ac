// Figures out of `stats` results: counter rates between two snapshots, sums of values and rates
// over the series of a family that carry given labels, and the gateway's traffic totals that the
// headers of `watch` and `top` show.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/ctl/render.hh"

namespace ferry::ctl {

// Per-second rates of the counters in `current` that also appear in `previous` (same name and
// labels), `elapsed_seconds` apart. A counter that went down was reset (ferryd restarted, or a
// worker was replaced) and counts from zero, as Prometheus' rate() does: value / elapsed. A
// series new in `current` gets no rate ("-"): how much of its value is recent is unknown.
// Gauges and histograms get none; elapsed_seconds <= 0 gives none.
SeriesRates compute_rates(const nlohmann::json& previous, const nlohmann::json& current,
                          double elapsed_seconds);

// Label name = value pairs a series must carry (it may carry more).
using LabelMatch = std::vector<std::pair<std::string, std::string>>;

// One stats result (and the rates of its counters, when there are any yet), searchable by family
// and labels. Sums are empty when no series matches: "-" is not "0".
class StatsIndex {
 public:
  StatsIndex(const nlohmann::json& stats, const SeriesRates* rates);

  // Sum of the values of the counter or gauge samples that match.
  std::optional<double> value(std::string_view family, const LabelMatch& match = {}) const;
  // Sum of the rates of the counters that match; empty also when none of them has a rate yet.
  std::optional<double> rate(std::string_view family, const LabelMatch& match = {}) const;
  // rate() split by the value of `label` (series without it are left out).
  std::map<std::string, double> rates_by(std::string_view family, std::string_view label,
                                         const LabelMatch& match = {}) const;

 private:
  struct Sample {
    std::string family;
    std::map<std::string, std::string> labels;
    double value = 0;
    std::optional<double> rate;
  };
  bool matches(const Sample& s, std::string_view family, const LabelMatch& match) const;

  std::vector<Sample> samples_;
};

// What the gateway carries: frames the AF_XDP workers received and sent (UDP on the fast path) and
// bytes the TCP proxy moved each way. A part is there when ferryd reports its counters; each
// rate is empty until it has one.
struct Traffic {
  bool fastpath = false;
  std::optional<double> fastpath_rx_pps, fastpath_rx_bps, fastpath_tx_pps, fastpath_tx_bps;
  bool proxy = false;
  std::optional<double> proxy_in_bps, proxy_out_bps;
};
Traffic gateway_traffic(const StatsIndex& stats);

// "fast path rx 1.23 kpps 9.84 Mbps, tx 1.23 kpps 9.84 Mbps  proxy in 3.2 Mbps, out 41 Mbps",
// without the parts that are not there, "-" for a rate not known yet; empty when neither is.
std::string format_traffic(const Traffic& traffic);

}  // namespace ferry::ctl
