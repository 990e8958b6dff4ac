// The QUIC test tools' --quic-lb option: "config_id=0,server_id=HEX,nonce_bytes=N[,key=32HEX]",
// the QUIC-LB configuration a server issues its connection IDs with and its own server ID.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "lib/quic/lb_config.hh"

namespace ferry::quic_test {

struct QuicLbOption {
  quic::LbConfig config;
  std::vector<std::uint8_t> server_id;  // config.server_id_bytes octets
};

// Throws std::invalid_argument saying which field is wrong (unknown, missing, not hex, out of the
// draft's bounds).
QuicLbOption parse_quic_lb_option(std::string_view text);

}  // namespace ferry::quic_test
