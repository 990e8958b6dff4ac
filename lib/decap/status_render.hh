// ferry-decap status as text (a table per attachment) and as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/decap/decap_commands.hh"

namespace ferry::decap {

// {"pin_dir": ..., "interfaces": [{"interface", "ifindex", "attached", "mode", "gue_port",
// "program_id", "local_addresses", "stripped": {KIND: {"packets", "bytes"}}, "passed": {...},
// "refused": {REASON: {...}}, "problem"?}]}
nlohmann::json status_json(const std::string& pin_dir, const std::vector<InterfaceStatus>& all);

std::string status_text(const std::string& pin_dir, const std::vector<InterfaceStatus>& all);

}  // namespace ferry::decap
