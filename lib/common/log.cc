// Levelled logging to stderr: syslog "<N>" prefixes under journald, timestamped lines elsewhere.
#include "lib/common/log.hh"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace ferry::log {
namespace {

std::atomic<int> g_threshold{static_cast<int>(Level::info)};
std::atomic<bool> g_journal{false};

}  // namespace

void init(Level level) {
  set_threshold(level);
  // journald sets JOURNAL_STREAM=dev:inode for the unit's stderr; it then parses "<N>" as the
  // priority and stamps the time itself.
  g_journal.store(std::getenv("JOURNAL_STREAM") != nullptr, std::memory_order_relaxed);
}

void set_threshold(Level level) { g_threshold.store(static_cast<int>(level), std::memory_order_relaxed); }

Level threshold() { return static_cast<Level>(g_threshold.load(std::memory_order_relaxed)); }

bool parse_level(std::string_view text, Level& out) {
  for (Level l : {Level::debug, Level::info, Level::notice, Level::warning, Level::error}) {
    if (text == level_name(l)) {
      out = l;
      return true;
    }
  }
  return false;
}

std::string_view level_name(Level level) {
  switch (level) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::notice: return "notice";
    case Level::warning: return "warning";
    case Level::error: return "error";
  }
  return "info";
}

void write(Level level, std::string_view message) {
  std::string line;
  if (g_journal.load(std::memory_order_relaxed)) {
    line = fmt::format("<{}>{}\n", static_cast<int>(level), message);
  } else {
    auto now = std::chrono::system_clock::now();
    std::time_t secs = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    line = fmt::format("{}.{:03}Z {:<7} {}\n", stamp, ms, level_name(level), message);
  }
  // One write(2) per line keeps lines from different threads whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ferry::log
