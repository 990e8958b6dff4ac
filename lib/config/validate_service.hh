// The services section of the config schema (validate_service.cc).
#pragma once

#include <string>
#include <vector>

#include "lib/config/config.hh"
#include "lib/config/schema_reader.hh"

namespace ferry::config::schema {

// services[]: every service checked on its own and against the others (unique names, one service
// per (vip, port, protocol), one UDP nat service per backend), and encapsulating services against
// `xdp` (its interfaces and encap, read before). Throws ConfigError.
std::vector<ServiceConfig> read_services(const SchemaReader& reader, const JsonValue& v,
                                         const std::string& path, const XdpConfig& xdp);

}  // namespace ferry::config::schema
