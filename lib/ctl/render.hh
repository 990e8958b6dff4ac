// Human text for each control command's result: one function per command, each tolerant of
// missing keys (skipped) and unknown keys (printed generically), never printing raw JSON rows.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ferry::ctl {

// "key: value" lines (uptime spelled out), then the XDP interfaces table.
std::string render_status(const nlohmann::json& result);

// Per-second rates keyed by series_key(); the watch view passes them to render_stats().
using SeriesRates = std::map<std::string, double>;

// METRIC LABELS VALUE table, one row per sample; histograms show count/sum/avg. With `rates`
// a RATE/s column follows: the rate for counters that have one, "-" for counters without one
// yet, empty for gauges and histograms.
std::string render_stats(const nlohmann::json& result, const SeriesRates* rates = nullptr);

std::string render_services(const nlohmann::json& result);  // NAME VIP:PORT PROTO MODE ...
std::string render_workers(const nlohmann::json& result);   // NAME KIND ALIVE HEARTBEAT + counters
std::string render_config(const nlohmann::json& result);    // "# PATH" then the JSON
std::string render_reload(const nlohmann::json& result);    // "reloaded PATH"
// "web 10.0.1.2:8080: drain, weight 2 (configured 1), health up, takes no new traffic"
std::string render_backend(const nlohmann::json& result);
std::string render_announce(const nlohmann::json& result);  // VIP ANNOUNCED SINCE SERVICES REASON
std::string render_help(const nlohmann::json& result);      // COMMAND ACCESS SUMMARY

// "k=v,k=v" for a labels object (nlohmann keeps keys sorted) or an array of [k, v] pairs (in
// order); empty for no labels.
std::string format_labels(const nlohmann::json& labels);

// Identity of one series across snapshots: name plus its labels.
std::string series_key(std::string_view name, const nlohmann::json& labels);

// A scalar for humans: strings bare, numbers via format_number(), null as "-", arrays of
// scalars comma-joined, anything else as compact JSON.
std::string format_value(const nlohmann::json& value);

}  // namespace ferry::ctl
