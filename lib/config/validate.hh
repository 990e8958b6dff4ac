// Schema and cross-checks that turn a parsed JSON tree into a Config.
#pragma once

#include <string>

#include "lib/config/config.hh"
#include "lib/config/json_tree.hh"

namespace ferry::config {

// Throws ConfigError at the offending key or value ("PATH: what is wrong and what is accepted"),
// or at the enclosing object's '{' when a required key is missing.
Config validate_config(const JsonValue& root, const std::string& source_name);

}  // namespace ferry::config
