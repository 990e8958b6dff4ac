// GnuTLS for the QUIC test server: the certificate credentials loaded once, and one TLS 1.3
// server session per connection configured for QUIC (ngtcp2_crypto_gnutls) with ALPN h3.
#pragma once

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <string>

namespace ferry::quic_test {

class TlsCredentials {
 public:
  // Throws std::runtime_error naming the file and GnuTLS's reason.
  TlsCredentials(const std::string& cert_file, const std::string& key_file);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  gnutls_certificate_credentials_t get() const { return credentials_; }

 private:
  gnutls_certificate_credentials_t credentials_ = nullptr;
};

class TlsSession {
 public:
  // `conn_ref` is how ngtcp2's GnuTLS glue finds the connection; it must outlive the session.
  // Throws std::runtime_error.
  TlsSession(const TlsCredentials& credentials, ngtcp2_crypto_conn_ref* conn_ref);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  gnutls_session_t get() const { return session_; }

 private:
  gnutls_session_t session_ = nullptr;
};

}  // namespace ferry::quic_test
