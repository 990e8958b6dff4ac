// `ferryctl watch`: stats snapshots on one connection, counter rates between successive
// snapshots, and a header with the daemon's pid, uptime and the gateway's traffic rates.
#include "lib/ctl/watch.hh"

#include <fmt/format.h>
#include <poll.h>

#include <ctime>

#include "lib/ctl/prefixes.hh"
#include "lib/ctl/units.hh"

namespace ferry::ctl {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

}  // namespace

std::string wall_clock() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

Ticker::Ticker(std::chrono::milliseconds interval, std::function<bool()> stop_requested)
    : interval_(interval), stop_requested_(std::move(stop_requested)), next_(Clock::now()) {}

bool Ticker::wait() {
  if (!first_) {
    next_ += interval_;
    if (next_ < Clock::now()) next_ = Clock::now();
    while (!stop_requested_()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(next_ - Clock::now()).count();
      if (left <= 0) break;
      ::poll(nullptr, 0, static_cast<int>(left));
    }
  }
  first_ = false;
  return !stop_requested_();
}

std::string render_header(std::string_view clock, const json& status, const Traffic& traffic) {
  std::string header(clock);
  if (status.is_object()) {
    if (status.contains("pid")) header += "  ferryd pid " + format_value(status["pid"]);
    if (status.contains("uptime_seconds") && status["uptime_seconds"].is_number()) {
      header += "  up " + format_duration(status["uptime_seconds"].get<double>());
    }
  }
  std::string text = format_traffic(traffic);
  if (!text.empty()) header += "  " + text;
  return header;
}

std::string render_watch_frame(std::string_view clock, const json& status, const json& stats,
                               const json& shown, const SeriesRates* rates) {
  static const SeriesRates kNoRatesYet;
  return render_header(clock, status, gateway_traffic(StatsIndex(stats, rates))) + "\n\n" +
         render_stats(shown, rates ? rates : &kNoRatesYet);
}

void run_watch(Client& client, const WatchOptions& options, std::ostream& out) {
  json json_args = json::object();
  if (!options.prefix.empty()) json_args["prefix"] = options.prefix;
  Ticker ticker(std::chrono::milliseconds(options.interval_ms), options.stop_requested);

  json previous;
  Clock::time_point previous_at;
  for (int shown = 0; options.count == 0 || shown < options.count; ++shown) {
    if (!ticker.wait()) break;

    if (options.json) {
      Response stats = client.call("stats", json_args);
      if (stats.ok && options.prefixes.size() > 1) {
        stats.raw["result"] = keep_prefixes(stats.raw["result"], options.prefixes);
      }
      out << stats.raw.dump() << "\n" << std::flush;
      expect_ok(stats);
      continue;
    }
    json status = expect_ok(client.call("status"));
    json stats = expect_ok(client.call("stats"));
    Clock::time_point at = Clock::now();

    std::optional<SeriesRates> rates;
    if (shown > 0) {
      rates =
          compute_rates(previous, stats, std::chrono::duration<double>(at - previous_at).count());
    }
    std::string frame =
        render_watch_frame(wall_clock(), status, stats, keep_prefixes(stats, options.prefixes),
                           rates ? &*rates : nullptr);
    if (options.clear_screen) {
      out << kClearScreen;
    } else if (shown > 0) {
      out << "\n";
    }
    out << frame << std::flush;
    previous = std::move(stats);
    previous_at = at;
  }
}

}  // namespace ferry::ctl
