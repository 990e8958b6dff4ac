// One connection of the QUIC test server: ngtcp2 with GnuTLS, the HTTP/3 responder, the CIDs it
// issued (in the server's CidTable), and the path it is on, logged when the client moves.
#pragma once

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tests/quic/cid_issuer.hh"
#include "tests/quic/cid_table.hh"
#include "tests/quic/http3_responder.hh"
#include "tests/quic/tls_server.hh"
#include "tests/quic/udp_socket.hh"

namespace ferry::quic_test {

// CLOCK_MONOTONIC in nanoseconds, ngtcp2's clock.
ngtcp2_tstamp monotonic_ns();

// What every connection of one server shares.
struct ServerContext {
  ResponderConfig responder;
  const CidIssuer& issuer;
  std::vector<std::uint8_t> reset_secret;  // the static key of stateless reset tokens
  const TlsCredentials& tls;
  UdpSocket& socket;
  CidTable& cids;
};

class QuicConnection {
 public:
  // From a client's first Initial (`hd`, accepted by ngtcp2_accept) that came from `remote`.
  // Throws std::runtime_error.
  QuicConnection(ServerContext& server, const ngtcp2_pkt_hd& hd, const SocketAddress& remote,
                 ngtcp2_tstamp now);
  ~QuicConnection();
  QuicConnection(const QuicConnection&) = delete;
  QuicConnection& operator=(const QuicConnection&) = delete;

  void on_datagram(const SocketAddress& remote, std::span<const std::uint8_t> data,
                   ngtcp2_tstamp now);
  void on_timer(ngtcp2_tstamp now);
  // Sends what ngtcp2 and HTTP/3 have (a packet the socket refused first).
  void write(ngtcp2_tstamp now);
  // SIGTERM: CONNECTION_CLOSE (no error) to the client, then finished.
  void shut_down(ngtcp2_tstamp now);

  ngtcp2_tstamp next_timer() const;
  bool finished() const { return state_ == State::finished; }
  bool send_blocked() const { return pending_.has_value(); }
  const std::string& first_scid() const { return first_scid_hex_; }

 private:
  enum class State { open, closing, draining, finished };
  struct Callbacks;
  struct ConnDeleter {
    void operator()(ngtcp2_conn* c) const { ngtcp2_conn_del(c); }
  };
  struct PendingPacket {
    SocketAddress to;
    std::vector<std::uint8_t> bytes;
  };

  void log(nlohmann::json event) const;
  void register_cid(std::span<const std::uint8_t> cid);
  void forget_cid(std::span<const std::uint8_t> cid);
  // Sends one packet; false when the socket is full (the packet is kept and sent first later).
  bool send(const ngtcp2_addr& to, std::span<const std::uint8_t> packet);
  void check_path();
  void fail(int liberr, ngtcp2_tstamp now);
  void start_closing(ngtcp2_tstamp now, const char* reason);
  void start_draining(ngtcp2_tstamp now, const char* reason);
  void finish(const char* reason);

  ServerContext& server_;
  ngtcp2_crypto_conn_ref conn_ref_;
  std::optional<TlsSession> tls_;
  std::unique_ptr<ngtcp2_conn, ConnDeleter> conn_;
  std::optional<Http3Responder> http_;           // from the 1-RTT keys on
  std::vector<std::vector<std::uint8_t>> cids_;  // in server_.cids, removed with the connection
  std::string first_scid_hex_;
  SocketAddress remote_;
  ngtcp2_connection_close_error last_error_;
  State state_ = State::open;
  std::string close_reason_;
  std::vector<std::uint8_t> close_packet_;  // what the closing period repeats
  ngtcp2_tstamp close_deadline_ = 0;
  std::optional<PendingPacket> pending_;
};

}  // namespace ferry::quic_test
