// The daemon's own process metrics: build info, start time, resident memory, open fds, CPU time.
#pragma once

#include <string>

#include "lib/metrics/registry.hh"

namespace ferry::metrics {

// Adds ferry_build_info{version}, ferry_start_time_seconds, ferry_process_resident_memory_bytes,
// ferry_process_open_fds and ferry_process_cpu_seconds_total, read from /proc and getrusage at
// every snapshot. A value that cannot be read is left out rather than reported as 0.
[[nodiscard]] Registry::Handle register_process_metrics(Registry& registry, std::string version,
                                                        double start_time_seconds);

}  // namespace ferry::metrics
