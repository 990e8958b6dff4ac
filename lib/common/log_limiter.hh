// Rate limiting for log lines a client can trigger at will (refused connections, failed auth),
// so a misbehaving client cannot flood the journal.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace ferry {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogLimiter(Clock::duration interval = std::chrono::seconds(10)) : interval_(interval) {}

  // True at most once per interval; then `suppressed` is how many calls were refused since the
  // last line, for a "(N more suppressed)" note.
  bool allow(std::uint64_t& suppressed, Clock::time_point now = Clock::now()) {
    if (logged_once_ && now < next_) {
      ++suppressed_;
      return false;
    }
    logged_once_ = true;
    next_ = now + interval_;
    suppressed = std::exchange(suppressed_, 0);
    return true;
  }

 private:
  Clock::duration interval_;
  Clock::time_point next_{};
  bool logged_once_ = false;
  std::uint64_t suppressed_ = 0;
};

// The tail a rate-limited line carries: " (N similar suppressed)", or nothing.
inline std::string suppressed_note(std::uint64_t suppressed) {
  return suppressed == 0 ? std::string() : fmt::format(" ({} similar suppressed)", suppressed);
}

}  // namespace ferry
