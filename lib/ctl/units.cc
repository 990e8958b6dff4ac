// Number, rate and duration formatting for ferryctl's human output.
#include "lib/ctl/units.hh"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdint>

namespace ferry::ctl {
namespace {

std::string non_finite(double value) {
  if (std::isnan(value)) return "NaN";
  return value > 0 ? "+Inf" : "-Inf";
}

}  // namespace

std::string format_number(double value) {
  if (!std::isfinite(value)) return non_finite(value);
  if (value == 0) return "0";  // also folds -0
  // Beyond 2^53 doubles have no fraction anyway; the bound keeps {:.0f} short and exact.
  if (std::abs(value) < 1e15 && value == std::trunc(value)) return fmt::format("{:.0f}", value);
  std::string text = fmt::format("{:.3f}", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  if (text == "0" || text == "-0") return fmt::format("{:.3g}", value);
  return text;
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second)) return non_finite(per_second);
  double magnitude = std::abs(per_second);
  int decimals = magnitude >= 99.5 ? 0 : magnitude >= 9.95 ? 1 : 2;
  std::string text = fmt::format("{:.{}f}", per_second, decimals);
  if (decimals > 0) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text == "-0" ? "0" : text;
}

std::string format_si(double value, std::string_view unit) {
  if (!std::isfinite(value)) return fmt::format("{} {}", non_finite(value), unit);
  static constexpr std::array<const char*, 6> kPrefixes = {"", "k", "M", "G", "T", "P"};
  double scaled = std::abs(value);
  std::size_t prefix = 0;
  // 999.5 rather than 1000 so that rounding never prints "1000 k" instead of "1.00 M".
  while (scaled >= 999.5 && prefix + 1 < kPrefixes.size()) {
    scaled /= 1000;
    ++prefix;
  }
  int decimals = scaled >= 99.95 ? 0 : scaled >= 9.995 ? 1 : 2;
  if (prefix == 0 && scaled == std::trunc(scaled)) decimals = 0;
  const char* sign = value < 0 ? "-" : "";
  return fmt::format("{}{:.{}f} {}{}", sign, scaled, decimals, kPrefixes[prefix], unit);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  auto total = static_cast<std::uint64_t>(std::floor(seconds));
  std::uint64_t days = total / 86400;
  std::uint64_t hours = total / 3600 % 24;
  std::uint64_t minutes = total / 60 % 60;
  std::uint64_t secs = total % 60;
  if (days > 0) return fmt::format("{}d {}h {}m {}s", days, hours, minutes, secs);
  if (hours > 0) return fmt::format("{}h {}m {}s", hours, minutes, secs);
  if (minutes > 0) return fmt::format("{}m {}s", minutes, secs);
  return fmt::format("{}s", secs);
}

std::string format_age_ms(double milliseconds) {
  if (!std::isfinite(milliseconds) || milliseconds < 0) return "-";
  if (milliseconds < 999.5) return fmt::format("{:.0f}ms", milliseconds);
  if (milliseconds < 59950) return fmt::format("{:.1f}s", milliseconds / 1000);
  return format_duration(milliseconds / 1000);
}

}  // namespace ferry::ctl
