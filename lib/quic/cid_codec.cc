// CidCodec: the three forms of draft-ietf-quic-load-balancers-21 section 5.4 (server) and 5.5
// (load balancer) over one configuration and its precomputed key schedule.
#include "lib/quic/cid_codec.hh"

#include <cstring>
#include <stdexcept>
#include <string>

#include "lib/quic/four_pass.hh"

namespace ferry::quic {

CidCodec::CidCodec(const LbConfig& config, AesEngine engine)
    : config_(config), algorithm_(config.algorithm()) {
  if (std::string why = lb_config_error(config); !why.empty()) throw std::invalid_argument(why);
  if (config.key) aes_.emplace(*config.key, engine);
}

void CidCodec::encode(std::span<const std::uint8_t> server_id, std::span<const std::uint8_t> nonce,
                      std::uint8_t low_bits, std::span<std::uint8_t> cid) const {
  if (server_id.size() != config_.server_id_bytes || nonce.size() != config_.nonce_bytes ||
      cid.size() < cid_bytes()) {
    throw std::invalid_argument("server ID, nonce or CID buffer does not fit the configuration");
  }
  std::uint8_t plain[kMaxCidBytes];
  std::memcpy(plain, server_id.data(), server_id.size());
  std::memcpy(plain + server_id.size(), nonce.data(), nonce.size());
  cid[0] = make_first_octet(config_.config_id, low_bits);
  std::uint8_t* body = cid.data() + 1;
  switch (algorithm_) {
    case LbAlgorithm::plaintext:
      std::memcpy(body, plain, config_.plaintext_bytes());
      break;
    case LbAlgorithm::single_pass:
      aes_->encrypt(plain, body);
      break;
    case LbAlgorithm::four_pass:
      four_pass_encrypt(*aes_, plain, config_.plaintext_bytes(), body);
      break;
  }
}

void CidCodec::decode(const std::uint8_t* cid, std::uint8_t* server_id) const noexcept {
  const std::uint8_t* body = cid + 1;
  switch (algorithm_) {
    case LbAlgorithm::plaintext:
      std::memcpy(server_id, body, config_.server_id_bytes);
      return;
    case LbAlgorithm::single_pass: {
      alignas(16) std::uint8_t plain[kAesBlockBytes];
      aes_->decrypt(body, plain);
      std::memcpy(server_id, plain, config_.server_id_bytes);
      return;
    }
    case LbAlgorithm::four_pass:
      four_pass_decrypt(*aes_, body, config_.plaintext_bytes(), server_id, config_.server_id_bytes);
      return;
  }
}

}  // namespace ferry::quic
