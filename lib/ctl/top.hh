// `ferryctl top`: the live view an operator keeps open. Every interval it asks ferryd for its
// services and stats on one connection and shows a row per (service, protocol): backends up,
// packets and bits per second each way, active connections, drops and errors per second
// (by reason with --reasons), a row per backend with --backends, and the fast path's drops.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>

#include "lib/ctl/client.hh"
#include "lib/ctl/top_view.hh"

namespace ferry::ctl {

struct TopOptions {
  int interval_ms = 1000;
  int count = 0;          // frames with rates to show; 0 = until stop_requested()
  bool backends = false;  // a row per backend under its service
  bool reasons = false;   // drops and errors by reason under each row
  TopSort sort = TopSort::traffic;
  bool clear_screen = false;  // stdout is a terminal: redraw in place, first frame at once
  bool json = false;          // one compact JSON object per frame instead of the table
  std::function<bool()> stop_requested = [] { return false; };
};

// The table (and the lines under it) for one frame, below the header.
std::string render_top_table(const TopView& view, const TopOptions& options);

// The same figures as one JSON object: per-second rates, null where the table shows "-".
nlohmann::json top_json(const TopView& view, const nlohmann::json& status, double interval_seconds);

// Runs the loop on `client`. Rates need two snapshots, so the first frame comes one interval
// after the start, except on a terminal, where a frame without rates is drawn at once. Errors
// throw CtlError.
void run_top(Client& client, const TopOptions& options, std::ostream& out);

}  // namespace ferry::ctl
