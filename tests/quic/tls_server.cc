// GnuTLS credentials and QUIC server sessions (see tls_server.hh); the priorities are the ones
// Debian's gtlsclient offers.
#include "tests/quic/tls_server.hh"

#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include <stdexcept>

namespace ferry::quic_test {

namespace {

constexpr const char* kPriorities =
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:"
    "+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"
    "+GROUP-SECP384R1:+GROUP-SECP521R1";

void check_gnutls(int rv, const std::string& what) {
  if (rv < 0) throw std::runtime_error(what + ": " + gnutls_strerror(rv));
}

}  // namespace

TlsCredentials::TlsCredentials(const std::string& cert_file, const std::string& key_file) {
  check_gnutls(gnutls_certificate_allocate_credentials(&credentials_),
               "gnutls_certificate_allocate_credentials");
  int rv = gnutls_certificate_set_x509_key_file(credentials_, cert_file.c_str(), key_file.c_str(),
                                                GNUTLS_X509_FMT_PEM);
  if (rv < 0) {
    gnutls_certificate_free_credentials(credentials_);
    throw std::runtime_error("loading --cert " + cert_file + " and --key " + key_file + ": " +
                             gnutls_strerror(rv));
  }
}

TlsCredentials::~TlsCredentials() {
  gnutls_certificate_free_credentials(credentials_);
}

TlsSession::TlsSession(const TlsCredentials& credentials, ngtcp2_crypto_conn_ref* conn_ref) {
  check_gnutls(gnutls_init(&session_, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET |
                                          GNUTLS_NO_END_OF_EARLY_DATA),
               "gnutls_init");
  try {
    check_gnutls(gnutls_priority_set_direct(session_, kPriorities, nullptr),
                 "gnutls_priority_set_direct");
    if (ngtcp2_crypto_gnutls_configure_server_session(session_) != 0) {
      throw std::runtime_error("ngtcp2_crypto_gnutls_configure_server_session failed");
    }
    gnutls_session_set_ptr(session_, conn_ref);
    check_gnutls(gnutls_credentials_set(session_, GNUTLS_CRD_CERTIFICATE, credentials.get()),
                 "gnutls_credentials_set");
    static const char kH3[] = "h3";
    gnutls_datum_t alpn{reinterpret_cast<unsigned char*>(const_cast<char*>(kH3)), 2};
    check_gnutls(gnutls_alpn_set_protocols(session_, &alpn, 1,
                                           GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE),
                 "gnutls_alpn_set_protocols");
  } catch (...) {
    gnutls_deinit(session_);
    throw;
  }
}

TlsSession::~TlsSession() {
  gnutls_deinit(session_);
}

}  // namespace ferry::quic_test
