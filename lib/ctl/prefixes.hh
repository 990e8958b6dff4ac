// Several PREFIX arguments to `stats` and `watch`: ferryd filters by one prefix, so ferryctl asks
// for their longest common prefix and keeps only the families matching one of them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ferry::ctl {

// The longest string every prefix starts with ("" for none, or no common start).
std::string common_prefix(const std::vector<std::string>& prefixes);

// `stats_result` ({"metrics":[{"name":..},..]}) with only the families whose name starts with one
// of `prefixes`; unchanged when `prefixes` is empty or the shape is unexpected.
nlohmann::json keep_prefixes(nlohmann::json stats_result, const std::vector<std::string>& prefixes);

}  // namespace ferry::ctl
