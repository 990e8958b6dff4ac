// QUIC-LB for the fast-path tests: a service's backends given server IDs, and the 1-RTT packets
// whose connection ID a backend's server issued, encoded as a QUIC-LB server would.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/config/config.hh"
#include "lib/quic/cid_codec.hh"

namespace ferry::fastpath::test {

// QUIC-LB on for `service` with configuration `e` alone; its backends get server IDs 0x11..,
// 0x22.., 0x33.. (each octet the backend's number times 0x11).
inline void use_quic_lb(config::ServiceConfig& service, const config::QuicLbConfigEntry& e) {
  service.quic_lb = config::QuicLbConfig{{e}};
  service.backend_server_ids.clear();
  for (std::size_t b = 1; b <= service.backends.size(); ++b) {
    service.backend_server_ids.push_back(
        config::ServerId(e.server_id_bytes, static_cast<std::uint8_t>(b * 0x11)));
  }
}

// A 1-RTT (short header) packet whose DCID the server of `service`'s backend `b` issued under the
// service's first QUIC-LB configuration, its nonce drawn from `nonce_seed`.
inline std::vector<std::uint8_t> short_header(const config::ServiceConfig& service, std::size_t b,
                                              std::uint8_t nonce_seed = 7) {
  const config::QuicLbConfigEntry& e = service.quic_lb->configs[0];
  quic::CidCodec codec({e.id, e.server_id_bytes, e.nonce_bytes, e.key}, quic::choose_aes_engine());
  std::vector<std::uint8_t> nonce(e.nonce_bytes);
  for (std::size_t i = 0; i < nonce.size(); ++i) {
    nonce[i] = static_cast<std::uint8_t>(nonce_seed + i * 13);
  }
  std::vector<std::uint8_t> cid(codec.cid_bytes());
  codec.encode(service.backend_server_ids[b], nonce, codec.self_encoded_length(), cid);
  std::vector<std::uint8_t> packet = {0x40};  // short header, fixed bit
  packet.insert(packet.end(), cid.begin(), cid.end());
  packet.resize(packet.size() + 40, 0xab);  // packet number and protected payload
  return packet;
}

}  // namespace ferry::fastpath::test
