// The daemon's own process metrics: build info, start time, resident memory, open fds, CPU time.
#include "lib/metrics/process_metrics.hh"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace ferry::metrics {
namespace {

std::optional<double> resident_memory_bytes() {
  // statm: size resident shared text lib data dt, in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return std::nullopt;
  unsigned long size_pages = 0, resident_pages = 0;
  int fields = std::fscanf(f, "%lu %lu", &size_pages, &resident_pages);
  std::fclose(f);
  if (fields != 2) return std::nullopt;
  long page_bytes = ::sysconf(_SC_PAGESIZE);
  if (page_bytes <= 0) return std::nullopt;
  return static_cast<double>(resident_pages) * static_cast<double>(page_bytes);
}

std::optional<double> open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return std::nullopt;
  // The directory stream holds an fd of its own, which is not one of ours to report.
  int own_fd = ::dirfd(dir);
  double count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    if (std::atoi(entry->d_name) == own_fd) continue;
    ++count;
  }
  ::closedir(dir);
  return count;
}

std::optional<double> cpu_seconds() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return std::nullopt;
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

Registry::Handle register_process_metrics(Registry& registry, std::string version,
                                          double start_time_seconds) {
  return registry.add([version = std::move(version), start_time_seconds](SnapshotBuilder& b) {
    b.gauge("ferry_build_info", "Build of the running ferryd; the value is always 1.",
            {{"version", version}}, 1);
    b.gauge("ferry_start_time_seconds", "Start time of the process since the Unix epoch, seconds.",
            {}, start_time_seconds);

    // Declared first so that HELP and TYPE are there even when /proc cannot be read.
    constexpr const char* kRssHelp = "Resident memory size, bytes.";
    constexpr const char* kFdsHelp = "Open file descriptors.";
    constexpr const char* kCpuHelp = "User and system CPU time spent, seconds.";
    b.declare("ferry_process_resident_memory_bytes", kRssHelp, Type::gauge);
    b.declare("ferry_process_open_fds", kFdsHelp, Type::gauge);
    b.declare("ferry_process_cpu_seconds_total", kCpuHelp, Type::counter);
    if (auto v = resident_memory_bytes()) {
      b.gauge("ferry_process_resident_memory_bytes", kRssHelp, {}, *v);
    }
    if (auto v = open_fds()) b.gauge("ferry_process_open_fds", kFdsHelp, {}, *v);
    if (auto v = cpu_seconds()) b.counter("ferry_process_cpu_seconds_total", kCpuHelp, {}, *v);
  });
}

}  // namespace ferry::metrics
