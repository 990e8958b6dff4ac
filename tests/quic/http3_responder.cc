// HTTP/3 responses of the QUIC test server (see http3_responder.hh).
#include "tests/quic/http3_responder.hh"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <string_view>

namespace ferry::quic_test {

namespace {

constexpr std::size_t kChunkBytes = 16 * 1024;
// Body bytes after the first line: static, so nghttp3 may keep pointing at them until acked.
const std::array<std::uint8_t, kChunkBytes> kFiller = [] {
  std::array<std::uint8_t, kChunkBytes> filler{};
  for (std::size_t i = 0; i < filler.size(); ++i) filler[i] = i % 64 == 63 ? '\n' : 'x';
  return filler;
}();
// A paced body may run this far ahead of its rate (so the first packets go out at once).
constexpr std::uint64_t kRateBurstBytes = 64 * 1024;
constexpr std::uint64_t kNanosPerSecond = 1'000'000'000;

Http3Responder& self(void* user_data) {
  return *static_cast<Http3Responder*>(user_data);
}

nghttp3_nv header(std::string_view name, std::string_view value) {
  return nghttp3_nv{
      reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())),
      name.size(),
      value.size(),
      NGHTTP3_NV_FLAG_NONE,
  };
}

std::string_view rcbuf_text(nghttp3_rcbuf* buffer) {
  nghttp3_vec v = nghttp3_rcbuf_get_buf(buffer);
  return {reinterpret_cast<const char*>(v.base), v.len};
}

}  // namespace

// nghttp3's callbacks: C functions that find the responder (or its connection) in user_data.
struct Http3Responder::Callbacks {
  static int acked_stream_data(nghttp3_conn*, int64_t stream_id, uint64_t datalen, void* user_data,
                               void*) {
    Http3Responder& r = self(user_data);
    auto it = r.responses_.find(stream_id);
    if (it == r.responses_.end()) return 0;
    Response& response = it->second;
    response.acked += datalen;
    if (response.waiting_for_acks && response.offered - response.acked < kMaxUnackedBytes / 2) {
      response.waiting_for_acks = false;
      nghttp3_conn_resume_stream(r.h3_.get(), stream_id);
    }
    return 0;
  }

  static int stream_close(nghttp3_conn*, int64_t stream_id, uint64_t app_error_code,
                          void* user_data, void*) {
    Http3Responder& r = self(user_data);
    auto it = r.responses_.find(stream_id);
    if (it != r.responses_.end()) {
      r.log_response(stream_id, it->second, app_error_code, true);
      r.responses_.erase(it);
    }
    if (ngtcp2_is_bidi_stream(stream_id)) ngtcp2_conn_extend_max_streams_bidi(r.conn_, 1);
    return 0;
  }

  static int consume(nghttp3_conn*, int64_t stream_id, size_t consumed, void* user_data) {
    Http3Responder& r = self(user_data);
    ngtcp2_conn_extend_max_stream_offset(r.conn_, stream_id, consumed);
    ngtcp2_conn_extend_max_offset(r.conn_, consumed);
    return 0;
  }
  static int recv_data(nghttp3_conn* conn, int64_t stream_id, const uint8_t*, size_t datalen,
                       void* user_data, void*) {
    return consume(conn, stream_id, datalen, user_data);
  }
  static int deferred_consume(nghttp3_conn* conn, int64_t stream_id, size_t consumed,
                              void* user_data, void*) {
    return consume(conn, stream_id, consumed, user_data);
  }

  static int begin_headers(nghttp3_conn*, int64_t stream_id, void* user_data, void*) {
    self(user_data).responses_[stream_id];
    return 0;
  }

  static int recv_header(nghttp3_conn*, int64_t stream_id, int32_t token, nghttp3_rcbuf*,
                         nghttp3_rcbuf* value, uint8_t, void* user_data, void*) {
    Http3Responder& r = self(user_data);
    auto it = r.responses_.find(stream_id);
    if (it == r.responses_.end()) return 0;
    if (token == NGHTTP3_QPACK_TOKEN__PATH) it->second.path = rcbuf_text(value);
    if (token == NGHTTP3_QPACK_TOKEN__METHOD) it->second.method = rcbuf_text(value);
    return 0;
  }

  static int end_stream(nghttp3_conn*, int64_t stream_id, void* user_data, void*) {
    Http3Responder& r = self(user_data);
    auto it = r.responses_.find(stream_id);
    if (it == r.responses_.end()) return 0;
    return r.start_response(stream_id, it->second) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
  }

  static int stop_sending(nghttp3_conn*, int64_t stream_id, uint64_t app_error_code,
                          void* user_data, void*) {
    ngtcp2_conn_shutdown_stream_read(self(user_data).conn_, stream_id, app_error_code);
    return 0;
  }
  static int reset_stream(nghttp3_conn*, int64_t stream_id, uint64_t app_error_code,
                          void* user_data, void*) {
    ngtcp2_conn_shutdown_stream_write(self(user_data).conn_, stream_id, app_error_code);
    return 0;
  }

  static nghttp3_ssize read_data(nghttp3_conn*, int64_t stream_id, nghttp3_vec* vec, size_t,
                                 uint32_t* flags, void* user_data, void*) {
    return self(user_data).read_body(stream_id, vec, flags);
  }
};

Http3Responder::Http3Responder(ngtcp2_conn* conn, const ResponderConfig& config,
                               std::function<void(nlohmann::json)> log)
    : conn_(conn), config_(config), log_(std::move(log)) {
  if (ngtcp2_conn_get_max_local_streams_uni(conn_) < 3) {
    throw std::runtime_error("the client allows fewer than 3 unidirectional streams");
  }
  nghttp3_callbacks callbacks{};
  callbacks.acked_stream_data = Callbacks::acked_stream_data;
  callbacks.stream_close = Callbacks::stream_close;
  callbacks.recv_data = Callbacks::recv_data;
  callbacks.deferred_consume = Callbacks::deferred_consume;
  callbacks.begin_headers = Callbacks::begin_headers;
  callbacks.recv_header = Callbacks::recv_header;
  callbacks.stop_sending = Callbacks::stop_sending;
  callbacks.end_stream = Callbacks::end_stream;
  callbacks.reset_stream = Callbacks::reset_stream;
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  nghttp3_conn* h3 = nullptr;
  if (int rv = nghttp3_conn_server_new(&h3, &callbacks, &settings, nghttp3_mem_default(), this);
      rv != 0) {
    throw std::runtime_error(std::string("nghttp3_conn_server_new: ") + nghttp3_strerror(rv));
  }
  h3_.reset(h3);
  nghttp3_conn_set_max_client_streams_bidi(
      h3, ngtcp2_conn_get_local_transport_params(conn_)->initial_max_streams_bidi);
  std::int64_t control = -1, qpack_encoder = -1, qpack_decoder = -1;
  if (ngtcp2_conn_open_uni_stream(conn_, &control, nullptr) != 0 ||
      ngtcp2_conn_open_uni_stream(conn_, &qpack_encoder, nullptr) != 0 ||
      ngtcp2_conn_open_uni_stream(conn_, &qpack_decoder, nullptr) != 0 ||
      nghttp3_conn_bind_control_stream(h3, control) != 0 ||
      nghttp3_conn_bind_qpack_streams(h3, qpack_encoder, qpack_decoder) != 0) {
    throw std::runtime_error("opening the HTTP/3 control and QPACK streams failed");
  }
}

int Http3Responder::start_response(std::int64_t stream_id, Response& response) {
  response.started_at = now_;
  constexpr std::string_view kBytesPrefix = "/bytes/";
  std::string_view path = response.path;
  std::string line = config_.name + "\n";
  if (response.method != "GET" && response.method != "HEAD") {
    response.status = 405;
    response.head = "method not allowed\n";
    response.body_bytes = response.head.size();
  } else if (path == "/name") {
    response.status = 200;
    response.head = line;
    response.body_bytes = line.size();
  } else if (path.starts_with(kBytesPrefix)) {
    std::string_view digits = path.substr(kBytesPrefix.size());
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
      response.status = 400;
      response.head = "bad length\n";
      response.body_bytes = response.head.size();
    } else {
      response.status = 200;
      response.head = line.substr(0, std::min<std::uint64_t>(n, line.size()));
      response.body_bytes = n;
    }
  } else {
    response.status = 404;
    response.head = "not found\n";
    response.body_bytes = response.head.size();
  }
  if (response.method == "HEAD") response.body_bytes = 0;
  log_({{"event", "request"},
        {"stream", stream_id},
        {"method", response.method},
        {"path", response.path},
        {"status", response.status}});

  std::string status = std::to_string(response.status);
  std::string length = std::to_string(response.body_bytes);
  std::array<nghttp3_nv, 4> headers{
      header(":status", status),
      header("server", config_.name),
      header("content-type", "text/plain"),
      header("content-length", length),
  };
  nghttp3_data_reader reader{Callbacks::read_data};
  int rv =
      nghttp3_conn_submit_response(h3_.get(), stream_id, headers.data(), headers.size(), &reader);
  return rv == 0 ? 0 : -1;
}

nghttp3_ssize Http3Responder::read_body(std::int64_t stream_id, nghttp3_vec* vec,
                                        std::uint32_t* flags) {
  auto it = responses_.find(stream_id);
  if (it == responses_.end()) return NGHTTP3_ERR_CALLBACK_FAILURE;
  Response& response = it->second;
  std::uint64_t left = response.body_bytes - response.offered;
  if (left == 0) {
    *flags |= NGHTTP3_DATA_FLAG_EOF;
    log_body_sent(stream_id, response);
    return 0;
  }
  std::uint64_t budget = kChunkBytes;
  if (response.offered - response.acked >= kMaxUnackedBytes) {
    response.waiting_for_acks = true;
    return NGHTTP3_ERR_WOULDBLOCK;
  }
  if (config_.body_bytes_per_s != 0) {
    std::uint64_t elapsed_ns = now_ - response.started_at;
    // bytes/s * ns / 1e9, in two steps so that neither overflows for hours at GB/s.
    std::uint64_t allowed =
        kRateBurstBytes + config_.body_bytes_per_s * (elapsed_ns / kNanosPerSecond) +
        config_.body_bytes_per_s * (elapsed_ns % kNanosPerSecond) / kNanosPerSecond;
    if (response.offered >= allowed) {
      std::uint64_t due_bytes = response.offered + kChunkBytes - kRateBurstBytes;
      response.resume_at =
          response.started_at + due_bytes / config_.body_bytes_per_s * kNanosPerSecond +
          due_bytes % config_.body_bytes_per_s * kNanosPerSecond / config_.body_bytes_per_s;
      return NGHTTP3_ERR_WOULDBLOCK;
    }
    budget = std::min(budget, allowed - response.offered);
  }
  std::uint64_t chunk = std::min(left, budget);
  if (response.offered < response.head.size()) {
    chunk = std::min<std::uint64_t>(chunk, response.head.size() - response.offered);
    vec->base = reinterpret_cast<uint8_t*>(response.head.data()) + response.offered;
  } else {
    vec->base = const_cast<uint8_t*>(kFiller.data());
  }
  vec->len = static_cast<std::size_t>(chunk);
  response.offered += chunk;
  if (response.offered == response.body_bytes) {
    *flags |= NGHTTP3_DATA_FLAG_EOF;
    log_body_sent(stream_id, response);
  }
  return 1;
}

void Http3Responder::log_body_sent(std::int64_t stream_id, Response& response) {
  if (response.body_sent_logged) return;
  response.body_sent_logged = true;
  log_({{"event", "body_sent"},
        {"stream", stream_id},
        {"path", response.path},
        {"body_bytes", response.body_bytes}});
}

void Http3Responder::log_response(std::int64_t stream_id, const Response& response,
                                  std::uint64_t app_error_code, bool complete) const {
  log_({{"event", "response"},
        {"stream", stream_id},
        {"path", response.path},
        {"status", response.status},
        {"body_bytes", response.body_bytes},
        {"acked_bytes", response.acked},
        {"app_error_code", app_error_code},
        {"complete", complete}});
}

Http3Responder::~Http3Responder() {
  // The streams the connection's end cut short: a client that closes the connection as soon as
  // it has every byte never acknowledges the last packets, so their streams never close.
  for (const auto& [stream_id, response] : responses_) {
    if (response.status != 0) log_response(stream_id, response, NGHTTP3_H3_NO_ERROR, false);
  }
}

void Http3Responder::resume_due() {
  for (auto& [stream_id, response] : responses_) {
    if (response.resume_at != 0 && response.resume_at <= now_) {
      response.resume_at = 0;
      nghttp3_conn_resume_stream(h3_.get(), stream_id);
    }
  }
}

ngtcp2_tstamp Http3Responder::next_resume() const {
  ngtcp2_tstamp next = std::numeric_limits<ngtcp2_tstamp>::max();
  for (const auto& [stream_id, response] : responses_) {
    if (response.resume_at != 0) next = std::min(next, response.resume_at);
  }
  return next;
}

}  // namespace ferry::quic_test
