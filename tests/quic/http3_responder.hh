// The HTTP/3 side of one test-server connection (nghttp3): `GET /name` answers the server's name,
// `GET /bytes/N` N bytes whose first line is the name, anything else 404. Bodies are produced as
// they are sent: at most kMaxUnackedBytes ahead of the client's acknowledgements and, with a body
// rate, no faster than it, so a multi-megabyte transfer lasts long enough to move the client
// mid-way.
#pragma once

#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace ferry::quic_test {

struct ResponderConfig {
  std::string name;
  std::uint64_t body_bytes_per_s = 0;  // 0: as fast as flow and congestion control allow
};

class Http3Responder {
 public:
  static constexpr std::uint64_t kMaxUnackedBytes = 1 << 20;

  // Opens the control and QPACK streams on `conn`, whose 1-RTT keys are installed. `log` writes
  // one event (the connection adds its own fields). Throws std::runtime_error.
  Http3Responder(ngtcp2_conn* conn, const ResponderConfig& config,
                 std::function<void(nlohmann::json)> log);
  ~Http3Responder();
  Http3Responder(const Http3Responder&) = delete;
  Http3Responder& operator=(const Http3Responder&) = delete;

  nghttp3_conn* get() const { return h3_.get(); }
  // The time callbacks see; the connection sets it before each call into nghttp3.
  void set_now(ngtcp2_tstamp now) { now_ = now; }
  // Resumes the bodies their rate held back whose time has come; the next such time (or
  // UINT64_MAX).
  void resume_due();
  ngtcp2_tstamp next_resume() const;

 private:
  struct Response {
    std::string method, path;
    int status = 0;
    std::string head;  // the body's first bytes; then filler
    std::uint64_t body_bytes = 0;
    std::uint64_t offered = 0;  // handed to nghttp3
    std::uint64_t acked = 0;
    ngtcp2_tstamp started_at = 0;
    ngtcp2_tstamp resume_at = 0;  // nonzero while held back by the rate
    bool waiting_for_acks = false;
    bool body_sent_logged = false;
  };
  struct Callbacks;
  struct H3Deleter {
    void operator()(nghttp3_conn* c) const { nghttp3_conn_del(c); }
  };

  int start_response(std::int64_t stream_id, Response& response);
  nghttp3_ssize read_body(std::int64_t stream_id, nghttp3_vec* vec, std::uint32_t* flags);
  // `body_sent`: the body's last byte handed to QUIC (once per response).
  void log_body_sent(std::int64_t stream_id, Response& response);
  // `response`: the stream closed (complete) or cut short by the connection's end.
  void log_response(std::int64_t stream_id, const Response& response, std::uint64_t app_error_code,
                    bool complete) const;

  ngtcp2_conn* conn_;
  ResponderConfig config_;
  std::function<void(nlohmann::json)> log_;
  std::unique_ptr<nghttp3_conn, H3Deleter> h3_;
  std::map<std::int64_t, Response> responses_;
  ngtcp2_tstamp now_ = 0;
};

}  // namespace ferry::quic_test
