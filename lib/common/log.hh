// Levelled logging to stderr: syslog "<N>" prefixes under journald, timestamped lines elsewhere.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace ferry::log {

enum class Level { debug = 7, info = 6, notice = 5, warning = 4, error = 3 };

// Reads JOURNAL_STREAM once to pick the line format; call early in main().
void init(Level threshold);
void set_threshold(Level threshold);
Level threshold();
bool parse_level(std::string_view text, Level& out);
std::string_view level_name(Level level);

void write(Level level, std::string_view message);

template <typename... Args>
void emit(Level level, fmt::format_string<Args...> format, Args&&... args) {
  if (static_cast<int>(level) > static_cast<int>(threshold())) return;
  write(level, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) { emit(Level::debug, f, std::forward<Args>(a)...); }
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... a) { emit(Level::info, f, std::forward<Args>(a)...); }
template <typename... Args>
void notice(fmt::format_string<Args...> f, Args&&... a) { emit(Level::notice, f, std::forward<Args>(a)...); }
template <typename... Args>
void warning(fmt::format_string<Args...> f, Args&&... a) { emit(Level::warning, f, std::forward<Args>(a)...); }
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... a) { emit(Level::error, f, std::forward<Args>(a)...); }

}  // namespace ferry::log
