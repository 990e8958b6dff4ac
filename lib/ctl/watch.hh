// `ferryctl watch`: stats snapshots on one connection, counter rates between successive
// snapshots, and a header with the daemon's pid, uptime and total packet and bit rates.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ctl/client.hh"
#include "lib/ctl/render.hh"

namespace ferry::ctl {

// Per-second rates of the counters in `current` that also appear in `previous` (same name and
// labels), `elapsed_seconds` apart. A counter that went down was reset (ferryd restarted, or a
// worker was replaced) and counts from zero, as Prometheus' rate() does: value / elapsed. A
// series new in `current` gets no rate ("-"): how much of its value is recent is unknown.
// Gauges and histograms get none; elapsed_seconds <= 0 gives none.
SeriesRates compute_rates(const nlohmann::json& previous, const nlohmann::json& current,
                          double elapsed_seconds);

// Sums of counter rates: series named "*_packets_total" as packets/s, "*_bytes_total" * 8 as
// bits/s. Each is empty when no such series has a rate.
struct Throughput {
  std::optional<double> packets_per_second;
  std::optional<double> bits_per_second;
};
Throughput total_throughput(const nlohmann::json& stats, const SeriesRates& rates);

// One screenful: header line ("20:00:01  ferryd pid 1234  up 3m 4s  1.23 kpps  9.84 Mbps"), a
// blank line, then the stats table with its RATE/s column. `rates` is null for the first
// snapshot; `clock` is the wall time to show.
std::string render_watch_frame(std::string_view clock, const nlohmann::json& status,
                               const nlohmann::json& stats, const SeriesRates* rates);

struct WatchOptions {
  std::string prefix;                 // sent as {"prefix": ...} when not empty
  std::vector<std::string> prefixes;  // with two or more, only families matching one are shown
  int interval_ms = 1000;
  int count = 0;              // snapshots to show; 0 = until stop_requested()
  bool clear_screen = false;  // stdout is a terminal: redraw in place
  bool json = false;          // print each stats response as one compact JSON line instead
  std::function<bool()> stop_requested = [] { return false; };
};

// Runs the loop on `client` until count snapshots or stop_requested(). Errors throw CtlError.
void run_watch(Client& client, const WatchOptions& options, std::ostream& out);

}  // namespace ferry::ctl
