// The direct-server-return keys (validate_encap.cc): "xdp.encap", the outer headers of
// encapsulated packets, and what a service with "forwarding" "ipip" or "gue" may be.
#pragma once

#include <string>

#include "lib/config/config.hh"
#include "lib/config/schema_reader.hh"

namespace ferry::config::schema {

// xdp.encap: {"source", "source_prefix", "source6", "gue_port"}. Throws ConfigError.
EncapConfig read_encap(const SchemaReader& reader, const JsonValue& v, const std::string& path);

// An encapsulating service as a whole: mode proxy on the fast path (xdp.interfaces), an outer
// source in xdp.encap for its backends' family, backends on the service's own port, and none of
// the TCP proxy's keys. Nothing for nat. `item` is the service's JSON object.
void check_forwarding_service(const SchemaReader& reader, const ServiceConfig& s,
                              const XdpConfig& xdp, const JsonValue& item, const std::string& path);

}  // namespace ferry::config::schema
