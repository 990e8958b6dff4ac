// Token authentication for the TCP control listener: the token file, the {"auth":..} line, a
// comparison that does not leak how much of a guess was right, and per-source failure limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ferry::control {

// Reads the token: trailing newlines stripped; throws std::runtime_error naming the file when it
// is missing, not a regular file, readable by group or others, or empty.
std::string read_token_file(const std::string& path);

// Compares in time that depends only on the lengths, never on where the first difference is.
bool token_matches(std::string_view expected, std::string_view given);

// The token of an auth line {"auth":"<token>"}, or nullopt when the line is anything else.
std::optional<std::string> parse_auth_line(std::string_view line);

// Counts authentication failures per source address over a sliding window; a source with
// `max_failures` in the window is turned away until its oldest failure leaves the window.
class AuthFailureLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AuthFailureLimiter(std::size_t max_failures = 5,
                              Clock::duration window = std::chrono::seconds(10),
                              std::size_t max_sources = 4096)
      : max_failures_(max_failures), window_(window), max_sources_(max_sources) {}

  bool blocked(const std::string& source, Clock::time_point now);
  void record_failure(const std::string& source, Clock::time_point now);
  std::size_t tracked_sources() const { return failures_.size(); }

 private:
  void expire(std::deque<Clock::time_point>& times, Clock::time_point now) const;

  std::size_t max_failures_;
  Clock::duration window_;
  std::size_t max_sources_;  // bounds the memory a scan from many addresses can take
  std::unordered_map<std::string, std::deque<Clock::time_point>> failures_;
};

}  // namespace ferry::control
