// The services section of the config schema (validate_service.cc).
#pragma once

#include <string>
#include <vector>

#include "lib/config/config.hh"
#include "lib/config/schema_reader.hh"

namespace ferry::config::schema {

// services[]: every service checked on its own and against the others (unique names, one service
// per (vip, port, protocol), one UDP service per backend). Throws ConfigError.
std::vector<ServiceConfig> read_services(const SchemaReader& reader, const JsonValue& v,
                                         const std::string& path);

}  // namespace ferry::config::schema
