// `ferryctl watch`: stats snapshots on one connection, counter rates between successive
// snapshots, and a header with the daemon's pid, uptime and the gateway's traffic rates.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ctl/client.hh"
#include "lib/ctl/render.hh"
#include "lib/ctl/series.hh"

namespace ferry::ctl {

// "20:00:01  ferryd pid 1234  up 3m 4s  " then format_traffic(): the first line of `watch` and
// `top`.
std::string render_header(std::string_view clock, const nlohmann::json& status,
                          const Traffic& traffic);

// One screenful: render_header(), a blank line, then the stats table of `shown` (the families
// asked for) with its RATE/s column. `stats` is every family (the header's traffic comes from
// counters the operator may not have asked to see); `rates` is null for the first snapshot.
std::string render_watch_frame(std::string_view clock, const nlohmann::json& status,
                               const nlohmann::json& stats, const nlohmann::json& shown,
                               const SeriesRates* rates);

// The refresh schedule of `watch` and `top`: wait() returns at once the first time, then every
// `interval` on a fixed schedule, so slow answers do not stretch it (or at once when they took
// longer than an interval). A signal (Ctrl-C) cuts the sleep short; wait() then returns false.
class Ticker {
 public:
  Ticker(std::chrono::milliseconds interval, std::function<bool()> stop_requested);
  bool wait();

 private:
  std::chrono::milliseconds interval_;
  std::function<bool()> stop_requested_;
  std::chrono::steady_clock::time_point next_;
  bool first_ = true;
};

// What `watch` and `top` write before a frame: the cursor home and a cleared screen.
inline constexpr std::string_view kClearScreen = "\x1b[H\x1b[2J";

// The wall clock as "HH:MM:SS".
std::string wall_clock();

struct WatchOptions {
  std::string prefix;                 // --json: sent as {"prefix": ...} when not empty
  std::vector<std::string> prefixes;  // only families matching one are shown (all when empty)
  int interval_ms = 1000;
  int count = 0;              // snapshots to show; 0 = until stop_requested()
  bool clear_screen = false;  // stdout is a terminal: redraw in place
  bool json = false;          // print each stats response as one compact JSON line instead
  std::function<bool()> stop_requested = [] { return false; };
};

// Runs the loop on `client` until count snapshots or stop_requested(). Errors throw CtlError.
void run_watch(Client& client, const WatchOptions& options, std::ostream& out);

}  // namespace ferry::ctl
