// One QUIC connection of the test server (see quic_connection.hh).
#include "tests/quic/quic_connection.hh"

#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <limits>
#include <random>
#include <stdexcept>

#include "tests/quic/event_log.hh"
#include "tests/quic/hex.hh"

namespace ferry::quic_test {

namespace {

constexpr std::size_t kMaxPacketBytes = 64 * 1024;
constexpr ngtcp2_duration kIdleTimeout = 30 * NGTCP2_SECONDS;

QuicConnection& self(void* user_data) {
  return *static_cast<QuicConnection*>(user_data);
}

std::span<const std::uint8_t> cid_span(const ngtcp2_cid& cid) {
  return {cid.data, cid.datalen};
}

std::string path_validation_result(ngtcp2_path_validation_result result) {
  switch (result) {
    case NGTCP2_PATH_VALIDATION_RESULT_SUCCESS:
      return "success";
    case NGTCP2_PATH_VALIDATION_RESULT_FAILURE:
      return "failure";
    case NGTCP2_PATH_VALIDATION_RESULT_ABORTED:
      return "aborted";
  }
  return "unknown";
}

}  // namespace

ngtcp2_tstamp monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<ngtcp2_tstamp>(ts.tv_sec) * NGTCP2_SECONDS +
         static_cast<ngtcp2_tstamp>(ts.tv_nsec);
}

// ngtcp2's callbacks: C functions that find the connection in user_data. None lets an exception
// out; a failure is NGTCP2_ERR_CALLBACK_FAILURE, which closes the connection.
struct QuicConnection::Callbacks {
  static void rand(uint8_t* dest, size_t destlen, const ngtcp2_rand_ctx*) {
    // Packet-number gaps and padding, not secrets: a seeded generator is what ngtcp2's own
    // examples use.
    thread_local std::mt19937 generator{std::random_device{}()};
    std::generate(dest, dest + destlen, [] { return static_cast<uint8_t>(generator()); });
  }

  static int get_new_connection_id(ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t cidlen,
                                   void* user_data) {
    QuicConnection& c = self(user_data);
    if (cidlen != c.server_.issuer.cid_bytes()) return NGTCP2_ERR_CALLBACK_FAILURE;
    try {
      c.server_.issuer.issue({cid->data, cidlen});
    } catch (const std::exception&) {
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    cid->datalen = cidlen;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c.server_.reset_secret.data(),
                                                     c.server_.reset_secret.size(), cid) != 0) {
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    c.register_cid(cid_span(*cid));
    return 0;
  }

  static int remove_connection_id(ngtcp2_conn*, const ngtcp2_cid* cid, void* user_data) {
    self(user_data).forget_cid(cid_span(*cid));
    return 0;
  }

  static int handshake_completed(ngtcp2_conn*, void* user_data) {
    self(user_data).log({{"event", "handshake"}});
    return 0;
  }

  static int path_validation(ngtcp2_conn*, uint32_t, const ngtcp2_path* path,
                             ngtcp2_path_validation_result result, void* user_data) {
    QuicConnection& c = self(user_data);
    c.log({{"event", "path_validation"},
           {"remote", SocketAddress::from(path->remote.addr, path->remote.addrlen).to_string()},
           {"result", path_validation_result(result)}});
    return 0;
  }

  static int recv_tx_key(ngtcp2_conn*, ngtcp2_crypto_level level, void* user_data) {
    QuicConnection& c = self(user_data);
    if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION || c.http_) return 0;
    try {
      c.http_.emplace(c.conn_.get(), c.server_.responder,
                      [&c](nlohmann::json event) { c.log(std::move(event)); });
    } catch (const std::exception& e) {
      c.log({{"event", "error"}, {"what", e.what()}});
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int recv_stream_data(ngtcp2_conn*, uint32_t flags, int64_t stream_id, uint64_t,
                              const uint8_t* data, size_t datalen, void* user_data, void*) {
    QuicConnection& c = self(user_data);
    if (!c.http_) return 0;
    nghttp3_ssize consumed = nghttp3_conn_read_stream(c.http_->get(), stream_id, data, datalen,
                                                      flags & NGTCP2_STREAM_DATA_FLAG_FIN);
    if (consumed < 0) {
      ngtcp2_connection_close_error_set_application_error(
          &c.last_error_, nghttp3_err_infer_quic_app_error_code(static_cast<int>(consumed)),
          nullptr, 0);
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    ngtcp2_conn_extend_max_stream_offset(c.conn_.get(), stream_id, static_cast<uint64_t>(consumed));
    ngtcp2_conn_extend_max_offset(c.conn_.get(), static_cast<uint64_t>(consumed));
    return 0;
  }

  static int acked_stream_data_offset(ngtcp2_conn*, int64_t stream_id, uint64_t, uint64_t datalen,
                                      void* user_data, void*) {
    QuicConnection& c = self(user_data);
    if (!c.http_) return 0;
    return nghttp3_conn_add_ack_offset(c.http_->get(), stream_id, datalen) == 0
               ? 0
               : NGTCP2_ERR_CALLBACK_FAILURE;
  }

  static int stream_close(ngtcp2_conn*, uint32_t flags, int64_t stream_id, uint64_t app_error_code,
                          void* user_data, void*) {
    QuicConnection& c = self(user_data);
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) {
      app_error_code = NGHTTP3_H3_NO_ERROR;
    }
    if (!c.http_) return 0;
    int rv = nghttp3_conn_close_stream(c.http_->get(), stream_id, app_error_code);
    if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND) {
      if (ngtcp2_is_bidi_stream(stream_id)) ngtcp2_conn_extend_max_streams_bidi(c.conn_.get(), 1);
      return 0;
    }
    if (rv != 0) {
      ngtcp2_connection_close_error_set_application_error(
          &c.last_error_, nghttp3_err_infer_quic_app_error_code(rv), nullptr, 0);
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int stream_reset(ngtcp2_conn*, int64_t stream_id, uint64_t, uint64_t, void* user_data,
                          void*) {
    QuicConnection& c = self(user_data);
    if (c.http_) nghttp3_conn_shutdown_stream_read(c.http_->get(), stream_id);
    return 0;
  }
  static int stream_stop_sending(ngtcp2_conn*, int64_t stream_id, uint64_t, void* user_data,
                                 void*) {
    QuicConnection& c = self(user_data);
    if (c.http_) nghttp3_conn_shutdown_stream_read(c.http_->get(), stream_id);
    return 0;
  }

  static int extend_max_remote_streams_bidi(ngtcp2_conn*, uint64_t max_streams, void* user_data) {
    QuicConnection& c = self(user_data);
    if (c.http_) nghttp3_conn_set_max_client_streams_bidi(c.http_->get(), max_streams);
    return 0;
  }
  static int extend_max_stream_data(ngtcp2_conn*, int64_t stream_id, uint64_t, void* user_data,
                                    void*) {
    QuicConnection& c = self(user_data);
    if (c.http_) nghttp3_conn_unblock_stream(c.http_->get(), stream_id);
    return 0;
  }

  static ngtcp2_conn* get_conn(ngtcp2_crypto_conn_ref* ref) {
    return static_cast<QuicConnection*>(ref->user_data)->conn_.get();
  }
};

QuicConnection::QuicConnection(ServerContext& server, const ngtcp2_pkt_hd& hd,
                               const SocketAddress& remote, ngtcp2_tstamp now)
    : server_(server), conn_ref_{Callbacks::get_conn, this}, remote_(remote) {
  ngtcp2_connection_close_error_default(&last_error_);
  ngtcp2_callbacks callbacks{};
  callbacks.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  callbacks.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  callbacks.handshake_completed = Callbacks::handshake_completed;
  callbacks.encrypt = ngtcp2_crypto_encrypt_cb;
  callbacks.decrypt = ngtcp2_crypto_decrypt_cb;
  callbacks.hp_mask = ngtcp2_crypto_hp_mask_cb;
  callbacks.recv_stream_data = Callbacks::recv_stream_data;
  callbacks.acked_stream_data_offset = Callbacks::acked_stream_data_offset;
  callbacks.stream_close = Callbacks::stream_close;
  callbacks.rand = Callbacks::rand;
  callbacks.get_new_connection_id = Callbacks::get_new_connection_id;
  callbacks.remove_connection_id = Callbacks::remove_connection_id;
  callbacks.update_key = ngtcp2_crypto_update_key_cb;
  callbacks.path_validation = Callbacks::path_validation;
  callbacks.stream_reset = Callbacks::stream_reset;
  callbacks.extend_max_remote_streams_bidi = Callbacks::extend_max_remote_streams_bidi;
  callbacks.extend_max_stream_data = Callbacks::extend_max_stream_data;
  callbacks.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  callbacks.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  callbacks.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  callbacks.stream_stop_sending = Callbacks::stream_stop_sending;
  callbacks.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  callbacks.recv_tx_key = Callbacks::recv_tx_key;

  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = now;

  // The first server CID: the SCID of the server's first Initial, QUIC-LB encoded like the rest.
  ngtcp2_cid scid{};
  scid.datalen = server_.issuer.cid_bytes();
  server_.issuer.issue({scid.data, scid.datalen});
  first_scid_hex_ = to_hex(cid_span(scid));

  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_stream_data_bidi_local = 256 * 1024;
  params.initial_max_stream_data_bidi_remote = 256 * 1024;
  params.initial_max_stream_data_uni = 256 * 1024;
  params.initial_max_data = 1024 * 1024;
  params.initial_max_streams_bidi = 100;
  params.initial_max_streams_uni = 3;
  params.max_idle_timeout = kIdleTimeout;
  params.active_connection_id_limit = 7;
  params.original_dcid = hd.dcid;
  params.stateless_reset_token_present = 1;
  if (ngtcp2_crypto_generate_stateless_reset_token(params.stateless_reset_token,
                                                   server_.reset_secret.data(),
                                                   server_.reset_secret.size(), &scid) != 0) {
    throw std::runtime_error("ngtcp2_crypto_generate_stateless_reset_token failed");
  }

  const SocketAddress& local = server_.socket.local();
  ngtcp2_path path{{const_cast<sockaddr*>(local.get()), local.len},
                   {const_cast<sockaddr*>(remote.get()), remote.len},
                   nullptr};
  ngtcp2_conn* conn = nullptr;
  if (int rv = ngtcp2_conn_server_new(&conn, &hd.scid, &scid, &path, hd.version, &callbacks,
                                      &settings, &params, nullptr, this);
      rv != 0) {
    throw std::runtime_error(std::string("ngtcp2_conn_server_new: ") + ngtcp2_strerror(rv));
  }
  conn_.reset(conn);
  tls_.emplace(server_.tls, &conn_ref_);
  ngtcp2_conn_set_tls_native_handle(conn, tls_->get());

  log({{"event", "connection"}, {"remote", remote_.to_string()}});
  register_cid(cid_span(scid));
  server_.cids.add(cid_span(hd.dcid), this);  // the client's original DCID, until we are gone
  cids_.emplace_back(hd.dcid.data, hd.dcid.data + hd.dcid.datalen);
}

QuicConnection::~QuicConnection() {
  for (const auto& cid : cids_) server_.cids.remove(cid);
}

void QuicConnection::log(nlohmann::json event) const {
  event["scid"] = first_scid_hex_;
  log_event(event);
}

void QuicConnection::register_cid(std::span<const std::uint8_t> cid) {
  server_.cids.add(cid, this);
  cids_.emplace_back(cid.begin(), cid.end());
  log({{"event", "cid"}, {"cid", to_hex(cid)}});
}

void QuicConnection::forget_cid(std::span<const std::uint8_t> cid) {
  server_.cids.remove(cid);
  std::erase_if(cids_, [&](const auto& c) { return std::ranges::equal(c, cid); });
}

bool QuicConnection::send(const ngtcp2_addr& to, std::span<const std::uint8_t> packet) {
  switch (server_.socket.send_to(to.addr, to.addrlen, packet)) {
    case SendResult::sent:
    case SendResult::failed:  // lost on the way, as far as QUIC can tell
      return true;
    case SendResult::blocked:
      pending_ = PendingPacket{SocketAddress::from(to.addr, to.addrlen),
                               std::vector<std::uint8_t>(packet.begin(), packet.end())};
      return false;
  }
  return true;
}

void QuicConnection::check_path() {
  if (!conn_) return;
  const ngtcp2_path* path = ngtcp2_conn_get_path(conn_.get());
  SocketAddress now_remote = SocketAddress::from(path->remote.addr, path->remote.addrlen);
  if (now_remote == remote_) return;
  log({{"event", "path"}, {"remote", now_remote.to_string()}, {"previous", remote_.to_string()}});
  remote_ = now_remote;
}

void QuicConnection::on_datagram(const SocketAddress& remote, std::span<const std::uint8_t> data,
                                 ngtcp2_tstamp now) {
  if (state_ == State::closing) {
    // Every packet in the closing period is answered with the CONNECTION_CLOSE again.
    server_.socket.send_to(remote.get(), remote.len, close_packet_);
    return;
  }
  if (state_ != State::open) return;
  if (http_) http_->set_now(now);
  const SocketAddress& local = server_.socket.local();
  ngtcp2_path path{{const_cast<sockaddr*>(local.get()), local.len},
                   {const_cast<sockaddr*>(remote.get()), remote.len},
                   nullptr};
  ngtcp2_pkt_info info{};
  int rv = ngtcp2_conn_read_pkt(conn_.get(), &path, &info, data.data(), data.size(), now);
  switch (rv) {
    case 0:
      check_path();
      return;
    case NGTCP2_ERR_DRAINING:
      start_draining(now, "peer closed");
      return;
    case NGTCP2_ERR_DROP_CONN:
      finish("dropped");
      return;
    case NGTCP2_ERR_CRYPTO:
      if (!last_error_.error_code) {
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &last_error_, ngtcp2_conn_get_tls_alert(conn_.get()), nullptr, 0);
      }
      start_closing(now, "tls error");
      return;
    default:
      fail(rv, now);
  }
}

void QuicConnection::on_timer(ngtcp2_tstamp now) {
  if (state_ == State::closing || state_ == State::draining) {
    if (now >= close_deadline_) finish(close_reason_.c_str());
    return;
  }
  if (state_ != State::open) return;
  if (http_) {
    http_->set_now(now);
    http_->resume_due();
  }
  if (ngtcp2_conn_get_expiry(conn_.get()) <= now) {
    if (int rv = ngtcp2_conn_handle_expiry(conn_.get(), now); rv != 0) {
      if (rv == NGTCP2_ERR_IDLE_CLOSE) {
        finish("idle timeout");
      } else {
        fail(rv, now);
      }
      return;
    }
    check_path();  // a failed validation of a new path reverts to the old one
  }
}

void QuicConnection::write(ngtcp2_tstamp now) {
  if (state_ != State::open) return;
  if (pending_) {
    if (server_.socket.send_to(pending_->to.get(), pending_->to.len, pending_->bytes) ==
        SendResult::blocked) {
      return;
    }
    pending_.reset();
  }
  if (http_) http_->set_now(now);
  static std::array<std::uint8_t, kMaxPacketBytes> buffer;
  const std::size_t max_payload = ngtcp2_conn_get_max_tx_udp_payload_size(conn_.get());
  const std::size_t max_packets =
      std::max<std::size_t>(1, ngtcp2_conn_get_send_quantum(conn_.get()) / max_payload);
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  std::size_t packets = 0;
  while (packets < max_packets) {
    std::int64_t stream_id = -1;
    int fin = 0;
    std::array<nghttp3_vec, 16> vec;
    nghttp3_ssize vec_count = 0;
    if (http_ && ngtcp2_conn_get_max_data_left(conn_.get())) {
      vec_count =
          nghttp3_conn_writev_stream(http_->get(), &stream_id, &fin, vec.data(), vec.size());
      if (vec_count < 0) {
        ngtcp2_connection_close_error_set_application_error(
            &last_error_, nghttp3_err_infer_quic_app_error_code(static_cast<int>(vec_count)),
            nullptr, 0);
        start_closing(now, "http/3 error");
        return;
      }
    }
    std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
    if (fin) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    ngtcp2_ssize stream_bytes = -1;
    ngtcp2_pkt_info info{};
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(
        conn_.get(), &ps.path, &info, buffer.data(), std::min(max_payload, buffer.size()),
        &stream_bytes, flags, stream_id, reinterpret_cast<const ngtcp2_vec*>(vec.data()),
        static_cast<std::size_t>(vec_count), now);
    if (n < 0) {
      switch (n) {
        case NGTCP2_ERR_STREAM_DATA_BLOCKED:
          nghttp3_conn_block_stream(http_->get(), stream_id);
          continue;
        case NGTCP2_ERR_STREAM_SHUT_WR:
          nghttp3_conn_shutdown_stream_write(http_->get(), stream_id);
          continue;
        case NGTCP2_ERR_WRITE_MORE:
          if (nghttp3_conn_add_write_offset(http_->get(), stream_id,
                                            static_cast<std::size_t>(stream_bytes)) != 0) {
            start_closing(now, "http/3 error");
            return;
          }
          continue;
        default:
          fail(static_cast<int>(n), now);
          return;
      }
    }
    if (stream_bytes >= 0 && http_ &&
        nghttp3_conn_add_write_offset(http_->get(), stream_id,
                                      static_cast<std::size_t>(stream_bytes)) != 0) {
      start_closing(now, "http/3 error");
      return;
    }
    if (n == 0) break;  // nothing more now (congestion, pacing or flow control)
    ++packets;
    if (!send(ps.path.remote, {buffer.data(), static_cast<std::size_t>(n)})) break;
  }
  ngtcp2_conn_update_pkt_tx_time(conn_.get(), now);
}

void QuicConnection::shut_down(ngtcp2_tstamp now) {
  if (state_ == State::open) {
    ngtcp2_connection_close_error_set_application_error(&last_error_, NGHTTP3_H3_NO_ERROR, nullptr,
                                                        0);
    start_closing(now, "server shutdown");
  }
  finish(close_reason_.empty() ? "server shutdown" : close_reason_.c_str());
}

ngtcp2_tstamp QuicConnection::next_timer() const {
  switch (state_) {
    case State::open:
      return std::min(ngtcp2_conn_get_expiry(conn_.get()),
                      http_ ? http_->next_resume() : std::numeric_limits<ngtcp2_tstamp>::max());
    case State::closing:
    case State::draining:
      return close_deadline_;
    case State::finished:
      break;
  }
  return 0;
}

void QuicConnection::fail(int liberr, ngtcp2_tstamp now) {
  if (!last_error_.error_code) {
    ngtcp2_connection_close_error_set_transport_error_liberr(&last_error_, liberr, nullptr, 0);
  }
  start_closing(now, ngtcp2_strerror(liberr));
}

void QuicConnection::start_closing(ngtcp2_tstamp now, const char* reason) {
  close_reason_ = reason;
  close_deadline_ = now + 3 * ngtcp2_conn_get_pto(conn_.get());
  state_ = State::closing;
  if (ngtcp2_conn_is_in_closing_period(conn_.get()) ||
      ngtcp2_conn_is_in_draining_period(conn_.get())) {
    return;
  }
  static std::array<std::uint8_t, NGTCP2_MAX_UDP_PAYLOAD_SIZE> buffer;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info info{};
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(conn_.get(), &ps.path, &info, buffer.data(),
                                                      buffer.size(), &last_error_, now);
  if (n <= 0) {
    finish(reason);  // nothing to repeat: gone at once
    return;
  }
  close_packet_.assign(buffer.data(), buffer.data() + n);
  server_.socket.send_to(ps.path.remote.addr, ps.path.remote.addrlen, close_packet_);
}

void QuicConnection::start_draining(ngtcp2_tstamp now, const char* reason) {
  close_reason_ = reason;
  close_deadline_ = now + 3 * ngtcp2_conn_get_pto(conn_.get());
  state_ = State::draining;
}

void QuicConnection::finish(const char* reason) {
  if (state_ == State::finished) return;
  state_ = State::finished;
  http_.reset();  // logs the responses the end cut short, before `closed`
  log({{"event", "closed"}, {"reason", reason}, {"remote", remote_.to_string()}});
}

}  // namespace ferry::quic_test
