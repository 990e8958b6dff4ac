// Several PREFIX arguments: the common start sent to ferryd, and the families kept locally.
#include "lib/ctl/prefixes.hh"

#include <gtest/gtest.h>

namespace ferry::ctl {
namespace {

using nlohmann::json;

json stats_of(std::initializer_list<const char*> names) {
  json families = json::array();
  for (const char* name : names) families.push_back({{"name", name}, {"samples", json::array()}});
  return {{"metrics", families}};
}

TEST(Prefixes, CommonPrefixIsTheLongestSharedStart) {
  EXPECT_EQ(common_prefix({}), "");
  EXPECT_EQ(common_prefix({"ferry_xdp_"}), "ferry_xdp_");
  EXPECT_EQ(common_prefix({"ferry_xdp_packets", "ferry_xdp_bytes"}), "ferry_xdp_");
  EXPECT_EQ(common_prefix({"ferry_proxy", "ferry_proxy_bytes"}), "ferry_proxy");
  EXPECT_EQ(common_prefix({"a", "b"}), "");
}

TEST(Prefixes, KeepsOnlyFamiliesMatchingOnePrefix) {
  json kept = keep_prefixes(
      stats_of({"ferry_xdp_packets_total", "ferry_proxy_bytes_total", "ferry_process_cpu"}),
      {"ferry_xdp_", "ferry_proxy_"});
  ASSERT_EQ(kept["metrics"].size(), 2u);
  EXPECT_EQ(kept["metrics"][0]["name"], "ferry_xdp_packets_total");
  EXPECT_EQ(kept["metrics"][1]["name"], "ferry_proxy_bytes_total");
}

TEST(Prefixes, OnePrefixFiltersToo) {
  // watch asks ferryd for everything (its header sums traffic counters) and filters itself.
  json kept = keep_prefixes(stats_of({"ab", "b", "a"}), {"a"});
  ASSERT_EQ(kept["metrics"].size(), 2u);
  EXPECT_EQ(kept["metrics"][0]["name"], "ab");
  EXPECT_EQ(kept["metrics"][1]["name"], "a");
}

TEST(Prefixes, NoPrefixOrAnUnexpectedShapeChangesNothing) {
  json stats = stats_of({"a", "b"});
  EXPECT_EQ(keep_prefixes(stats, {}), stats);
  json odd = {{"metrics", "not an array"}};
  EXPECT_EQ(keep_prefixes(odd, {"a", "b"}), odd);
  json unnamed = {{"metrics", json::array({json::object(), 42})}};
  EXPECT_EQ(keep_prefixes(unnamed, {"a", "b"})["metrics"].size(), 0u);
}

}  // namespace
}  // namespace ferry::ctl
