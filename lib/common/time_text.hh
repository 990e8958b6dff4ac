// Wall-clock times as status and control answers write them.
#pragma once

#include <chrono>
#include <string>

namespace ferry {

// "2026-12-01T19:26:29Z": UTC, to the second.
std::string iso8601_utc(std::chrono::system_clock::time_point t);

}  // namespace ferry
