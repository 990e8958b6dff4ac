// The health object of a service (validate_health.cc): timing, the check type and its own keys.
#pragma once

#include <string>

#include "lib/config/config.hh"
#include "lib/config/schema_reader.hh"

namespace ferry::config::schema {

// services[].health; `protocols` are the service's, which decide the types it may use (a udp or
// dns check needs UDP, an http check TCP; tcp checks any). Throws ConfigError.
HealthCheckConfig read_health(const SchemaReader& reader, const JsonValue& v,
                              const std::string& path, const Protocols& protocols);

}  // namespace ferry::config::schema
