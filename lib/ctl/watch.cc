// `ferryctl watch`: stats snapshots on one connection, counter rates between successive
// snapshots, and a header with the daemon's pid, uptime and total packet and bit rates.
#include "lib/ctl/watch.hh"

#include <fmt/format.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <map>

#include "lib/ctl/prefixes.hh"
#include "lib/ctl/units.hh"

namespace ferry::ctl {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kClearScreen = "\x1b[H\x1b[2J";

// Calls fn(name, labels, value) for every counter sample with a numeric value.
template <typename Fn>
void for_each_counter(const json& stats, Fn&& fn) {
  if (!stats.is_object()) return;
  auto families = stats.find("metrics");
  if (families == stats.end() || !families->is_array()) return;
  for (const json& family : *families) {
    if (!family.is_object() || family.value("type", "") != "counter") continue;
    auto name = family.find("name");
    auto samples = family.find("samples");
    if (name == family.end() || !name->is_string()) continue;
    if (samples == family.end() || !samples->is_array()) continue;
    for (const json& sample : *samples) {
      if (!sample.is_object()) continue;
      auto value = sample.find("value");
      if (value == sample.end() || !value->is_number()) continue;
      fn(name->get_ref<const std::string&>(), sample.value("labels", json::object()),
         value->get<double>());
    }
  }
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string wall_clock() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

// Sleeps until `until` unless stop is requested; a signal (Ctrl-C) cuts poll() short.
void sleep_until(Clock::time_point until, const std::function<bool()>& stop_requested) {
  while (!stop_requested()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return;
    ::poll(nullptr, 0, static_cast<int>(left));
  }
}

}  // namespace

SeriesRates compute_rates(const json& previous, const json& current, double elapsed_seconds) {
  SeriesRates rates;
  if (!(elapsed_seconds > 0)) return rates;
  std::map<std::string, double> before;
  for_each_counter(previous, [&](const std::string& name, const json& labels, double value) {
    before[series_key(name, labels)] = value;
  });
  for_each_counter(current, [&](const std::string& name, const json& labels, double value) {
    std::string key = series_key(name, labels);
    auto it = before.find(key);
    if (it == before.end()) return;
    double increase = value >= it->second ? value - it->second : value;
    rates[key] = increase / elapsed_seconds;
  });
  return rates;
}

Throughput total_throughput(const json& stats, const SeriesRates& rates) {
  Throughput total;
  for_each_counter(stats, [&](const std::string& name, const json& labels, double) {
    auto it = rates.find(series_key(name, labels));
    if (it == rates.end()) return;
    if (ends_with(name, "_packets_total")) {
      total.packets_per_second = total.packets_per_second.value_or(0) + it->second;
    } else if (ends_with(name, "_bytes_total")) {
      total.bits_per_second = total.bits_per_second.value_or(0) + it->second * 8;
    }
  });
  return total;
}

std::string render_watch_frame(std::string_view clock, const json& status, const json& stats,
                               const SeriesRates* rates) {
  std::string header(clock);
  if (status.is_object()) {
    if (status.contains("pid")) header += "  ferryd pid " + format_value(status["pid"]);
    if (status.contains("uptime_seconds") && status["uptime_seconds"].is_number()) {
      header += "  up " + format_duration(status["uptime_seconds"].get<double>());
    }
  }
  Throughput total = rates ? total_throughput(stats, *rates) : Throughput{};
  header += "  " + (total.packets_per_second ? format_si(*total.packets_per_second, "pps")
                                             : std::string("- pps"));
  header += "  " + (total.bits_per_second ? format_si(*total.bits_per_second, "bps")
                                          : std::string("- bps"));
  static const SeriesRates kNoRatesYet;
  return header + "\n\n" + render_stats(stats, rates ? rates : &kNoRatesYet);
}

void run_watch(Client& client, const WatchOptions& options, std::ostream& out) {
  json args = json::object();
  if (!options.prefix.empty()) args["prefix"] = options.prefix;
  const auto interval = std::chrono::milliseconds(options.interval_ms);

  json previous;
  Clock::time_point previous_at;
  Clock::time_point next_tick = Clock::now();
  for (int shown = 0; options.count == 0 || shown < options.count; ++shown) {
    if (shown > 0) {
      // Ticks on a fixed schedule so slow answers do not stretch the interval.
      next_tick += interval;
      if (next_tick < Clock::now()) next_tick = Clock::now();
      sleep_until(next_tick, options.stop_requested);
    }
    if (options.stop_requested()) break;

    if (options.json) {
      Response stats = client.call("stats", args);
      if (stats.ok && options.prefixes.size() > 1) {
        stats.raw["result"] = keep_prefixes(stats.raw["result"], options.prefixes);
      }
      out << stats.raw.dump() << "\n" << std::flush;
      expect_ok(stats);
      continue;
    }
    json status = expect_ok(client.call("status"));
    json stats = keep_prefixes(expect_ok(client.call("stats", args)), options.prefixes);
    Clock::time_point at = Clock::now();

    std::optional<SeriesRates> rates;
    if (shown > 0) {
      rates =
          compute_rates(previous, stats, std::chrono::duration<double>(at - previous_at).count());
    }
    std::string frame = render_watch_frame(wall_clock(), status, stats, rates ? &*rates : nullptr);
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
