// Wall-clock times as text.
#include "lib/common/time_text.hh"

#include <fmt/chrono.h>

namespace ferry {

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(t)));
}

}  // namespace ferry
