// Several metric-name prefixes for stats and watch (see prefixes.hh).
#include "lib/ctl/prefixes.hh"

#include <algorithm>

namespace ferry::ctl {

std::string common_prefix(const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) return {};
  std::string common = prefixes.front();
  for (const std::string& p : prefixes) {
    auto [mismatch, unused] = std::mismatch(common.begin(), common.end(), p.begin(), p.end());
    common.erase(mismatch, common.end());
  }
  return common;
}

nlohmann::json keep_prefixes(nlohmann::json stats_result,
                             const std::vector<std::string>& prefixes) {
  if (prefixes.empty() || !stats_result.is_object()) return stats_result;
  auto families = stats_result.find("metrics");
  if (families == stats_result.end() || !families->is_array()) return stats_result;
  nlohmann::json kept = nlohmann::json::array();
  for (auto& family : *families) {
    const auto name = family.is_object() ? family.find("name") : family.end();
    if (name == family.end() || !name->is_string()) continue;
    const std::string& text = name->get_ref<const std::string&>();
    if (std::any_of(prefixes.begin(), prefixes.end(),
                    [&](const std::string& p) { return text.starts_with(p); })) {
      kept.push_back(std::move(family));
    }
  }
  *families = std::move(kept);
  return stats_result;
}

}  // namespace ferry::ctl
