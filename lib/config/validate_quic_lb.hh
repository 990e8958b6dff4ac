// The QUIC-LB keys of a service (validate_quic_lb.cc): "quic_lb" on a UDP service and each
// backend's "server_id", against the bounds of draft-ietf-quic-load-balancers-21.
#pragma once

#include <string>

#include "lib/config/config.hh"
#include "lib/config/schema_reader.hh"

namespace ferry::config::schema {

// quic_lb: {"configs": [{"id", "server_id_bytes", "nonce_bytes", "key"}, ...]}. Throws
// ConfigError; no message quotes a key.
QuicLbConfig read_quic_lb(const SchemaReader& reader, const JsonValue& v, const std::string& path);

// A backend's "server_id": an even number of hex digits, 1..15 octets.
ServerId read_server_id(const SchemaReader& reader, const JsonValue& v, const std::string& path);

// The service as a whole: quic_lb only on a UDP proxy service; server IDs only with quic_lb,
// each of a configured server_id_bytes, none twice. `item` is the service's JSON object.
void check_quic_lb_service(const SchemaReader& reader, const ServiceConfig& s,
                           const JsonValue& item, const std::string& path);

}  // namespace ferry::config::schema
