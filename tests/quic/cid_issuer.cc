// CID issuance for the QUIC test server (see cid_issuer.hh).
#include "tests/quic/cid_issuer.hh"

#include <sys/random.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace ferry::quic_test {

void fill_random(std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    done += static_cast<std::size_t>(n);
  }
}

CidIssuer::CidIssuer(const std::optional<QuicLbOption>& quic_lb) {
  if (!quic_lb) return;
  codec_.emplace(quic_lb->config, quic::choose_aes_engine());
  server_id_ = quic_lb->server_id;
}

void CidIssuer::issue(std::span<std::uint8_t> cid) const {
  if (cid.size() != cid_bytes()) throw std::invalid_argument("CidIssuer::issue: wrong length");
  if (!codec_) {
    fill_random(cid);
    return;
  }
  std::uint8_t nonce[quic::kMaxNonceBytes];
  std::span<std::uint8_t> nonce_span(nonce, codec_->config().nonce_bytes);
  fill_random(nonce_span);
  codec_->encode(server_id_, nonce_span, codec_->self_encoded_length(), cid);
}

}  // namespace ferry::quic_test
