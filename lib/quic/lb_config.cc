// The draft's bounds on a QUIC-LB configuration, as one message for whoever builds one.
#include "lib/quic/lb_config.hh"

#include <fmt/format.h>

namespace ferry::quic {

std::string_view to_string(LbAlgorithm algorithm) {
  switch (algorithm) {
    case LbAlgorithm::plaintext:
      return "plaintext";
    case LbAlgorithm::single_pass:
      return "single_pass";
    case LbAlgorithm::four_pass:
      return "four_pass";
  }
  return "unknown";
}

std::string lb_config_error(const LbConfig& c) {
  if (c.config_id >= kConfigIdCount) {
    return fmt::format("config id {} is not 0..6 (7, 0b111, marks unroutable CIDs)", c.config_id);
  }
  if (c.server_id_bytes < kMinServerIdBytes || c.server_id_bytes > kMaxServerIdBytes) {
    return fmt::format("server_id_bytes {} is not {}..{}", c.server_id_bytes, kMinServerIdBytes,
                       kMaxServerIdBytes);
  }
  if (c.nonce_bytes < kMinNonceBytes || c.nonce_bytes > kMaxNonceBytes) {
    return fmt::format("nonce_bytes {} is not {}..{}", c.nonce_bytes, kMinNonceBytes,
                       kMaxNonceBytes);
  }
  if (c.plaintext_bytes() > kMaxPlaintextBytes) {
    return fmt::format("server_id_bytes + nonce_bytes is {}; at most {} fit a 20-octet CID",
                       c.plaintext_bytes(), kMaxPlaintextBytes);
  }
  return {};
}

}  // namespace ferry::quic
