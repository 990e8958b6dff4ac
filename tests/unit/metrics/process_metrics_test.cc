// The daemon's own process metrics read from /proc and getrusage.
#include "lib/metrics/process_metrics.hh"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <optional>

namespace ferry::metrics {
namespace {

const Family* find(const Snapshot& s, const std::string& name) {
  for (const Family& f : s) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::optional<double> only_value(const Snapshot& s, const std::string& name) {
  const Family* f = find(s, name);
  if (!f || f->samples.size() != 1) return std::nullopt;
  return f->samples[0].value;
}

TEST(ProcessMetrics, ReportsBuildInfoStartTimeMemoryFdsAndCpu) {
  Registry registry;
  auto handle = register_process_metrics(registry, "1.2.3", 1700000000.5);
  Snapshot s = registry.snapshot();

  const Family* build = find(s, "ferry_build_info");
  ASSERT_NE(build, nullptr);
  EXPECT_EQ(build->type, Type::gauge);
  ASSERT_EQ(build->samples.size(), 1u);
  EXPECT_EQ(build->samples[0].labels, (Labels{{"version", "1.2.3"}}));
  EXPECT_EQ(build->samples[0].value, 1);

  EXPECT_EQ(only_value(s, "ferry_start_time_seconds"), 1700000000.5);
  auto rss = only_value(s, "ferry_process_resident_memory_bytes");
  ASSERT_TRUE(rss);
  EXPECT_GT(*rss, 64 * 1024);
  EXPECT_EQ(std::fmod(*rss, static_cast<double>(::sysconf(_SC_PAGESIZE))), 0);
  const Family* cpu = find(s, "ferry_process_cpu_seconds_total");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->type, Type::counter);
  ASSERT_TRUE(only_value(s, "ferry_process_cpu_seconds_total"));
  EXPECT_GE(*only_value(s, "ferry_process_cpu_seconds_total"), 0);
}

TEST(ProcessMetrics, CountsOpenFdsExactly) {
  Registry registry;
  auto handle = register_process_metrics(registry, "x", 0);
  auto before = only_value(registry.snapshot(), "ferry_process_open_fds");
  ASSERT_TRUE(before);
  int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int b = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  auto during = only_value(registry.snapshot(), "ferry_process_open_fds");
  ::close(a);
  ::close(b);
  EXPECT_EQ(*during, *before + 2);
}

TEST(ProcessMetrics, HandleRemovesTheFamilies) {
  Registry registry;
  {
    auto handle = register_process_metrics(registry, "x", 0);
    EXPECT_EQ(registry.snapshot().size(), 5u);
  }
  EXPECT_TRUE(registry.snapshot().empty());
}

}  // namespace
}  // namespace ferry::metrics
