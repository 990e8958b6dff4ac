// Number, rate and duration formatting for ferryctl's human output.
#pragma once

#include <string>
#include <string_view>

namespace ferry::ctl {

// Integers print without decimals ("3"), others with at most 3 trimmed decimals ("2.5",
// "0.125"); tiny non-zero values keep 3 significant digits ("0.000123"). Non-finite values use
// the Prometheus spelling ("NaN", "+Inf", "-Inf").
std::string format_number(double value);

// A per-second rate for a table cell: whole numbers from 100 up ("119998"), one decimal from 10
// ("12.3"), at most two below ("2.5", "0.33"), so the column reads at a glance.
std::string format_rate(double per_second);

// Scales by 1000 with k, M, G, T, P and keeps 3 significant digits: 0 -> "0 pps",
// 1234 -> "1.23 kpps", 98400000 -> "98.4 Mbps".
std::string format_si(double value, std::string_view unit);

// Whole seconds from the largest non-zero unit down: 12.5 -> "12s", 3600 -> "1h 0m 0s",
// 93784 -> "1d 2h 3m 4s". Negative or non-finite -> "-".
std::string format_duration(double seconds);

// A short age: "12ms" below a second, "1.5s" below a minute, format_duration() above.
std::string format_age_ms(double milliseconds);

}  // namespace ferry::ctl
