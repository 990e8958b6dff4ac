// http: connect, send one GET, and judge the status line of the answer: it passes when the
// status is within expect_status. At most kResponseBytes are read; then the connection is reset.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

#include "lib/health/check.hh"
#include "lib/health/http_status.hh"

namespace ferry::health {
namespace {

constexpr std::size_t kResponseBytes = 4096;

// Host: the configured one, else the checked address, with the port unless it is 80.
std::string host_of(const net::Endpoint& target, const config::HealthCheckConfig& params) {
  if (params.host) return *params.host;
  if (target.port != 80) return target.to_string();
  std::string address = target.address.to_string();
  return target.address.is_v4() ? address : "[" + address + "]";
}

class HttpCheck final : public Check {
 public:
  HttpCheck(const CheckAddress& target, const config::HealthCheckConfig& params)
      : target_(target),
        request_("GET " + params.path + " HTTP/1.1\r\nHost: " + host_of(target.endpoint, params) +
                 "\r\nUser-Agent: ferry-health\r\nAccept: */*\r\nConnection: close\r\n\r\n"),
        low_(params.status_low),
        high_(params.status_high) {
    response_.reserve(kResponseBytes);
  }

  CheckStep start() override {
    int err = 0;
    const char* what = "";
    socket_ = connect_socket(target_, SOCK_STREAM, err, what);
    if (!socket_) {
      return CheckStep::done(CheckResult::error, std::string(what) + ": " + describe_errno(err));
    }
    if (err == 0) return send_request();
    if (err != EINPROGRESS) return CheckStep::done(result_of_errno(err), describe_errno(err));
    return CheckStep::wait(EPOLLOUT);
  }

  CheckStep resume(std::uint32_t) override {
    switch (phase_) {
      case Phase::connecting: {
        int err = socket_error(socket_.get());
        if (err != 0) return CheckStep::done(result_of_errno(err), describe_errno(err));
        return send_request();
      }
      case Phase::sending:
        return send_request();
      case Phase::reading:
        return read_response();
    }
    return CheckStep::done(CheckResult::error, "internal: unknown phase");
  }

  std::string timeout_reason(std::uint32_t timeout_ms) const override {
    std::string ms = std::to_string(timeout_ms) + " ms";
    if (phase_ == Phase::connecting) return "connect timeout after " + ms;
    if (phase_ == Phase::sending) return "request not sent within " + ms;
    return "no HTTP status line within " + ms;
  }

 private:
  enum class Phase { connecting, sending, reading };

  CheckStep send_request() {
    phase_ = Phase::sending;
    while (sent_ < request_.size()) {
      ssize_t n = ::send(socket_.get(), request_.data() + sent_, request_.size() - sent_,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) return CheckStep::wait(EPOLLOUT);
        if (err == EINTR) continue;
        return CheckStep::done(CheckResult::error, "send: " + describe_errno(err));
      }
      sent_ += static_cast<std::size_t>(n);
    }
    phase_ = Phase::reading;
    return CheckStep::wait(EPOLLIN);
  }

  CheckStep read_response() {
    char buffer[kResponseBytes];
    for (;;) {
      std::size_t room = kResponseBytes - response_.size();
      ssize_t n = ::recv(socket_.get(), buffer, room, MSG_DONTWAIT);
      if (n < 0) {
        int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) return CheckStep::wait(EPOLLIN);
        if (err == EINTR) continue;
        return CheckStep::done(CheckResult::error, "recv: " + describe_errno(err));
      }
      if (n == 0) {
        return CheckStep::done(CheckResult::error,
                               response_.empty()
                                   ? "connection closed without a response"
                                   : "connection closed after " + std::to_string(response_.size()) +
                                         " bytes, before a complete status line");
      }
      response_.append(buffer, static_cast<std::size_t>(n));
      HttpStatus status = parse_http_status(response_);
      switch (status.state) {
        case HttpStatus::State::malformed:
          return CheckStep::done(CheckResult::error, "not an HTTP response: " + status.why);
        case HttpStatus::State::complete: {
          std::string reason = "status " + std::to_string(status.code);
          bool ok = status.code >= low_ && status.code <= high_;
          return CheckStep::done(ok ? CheckResult::ok : CheckResult::error, std::move(reason));
        }
        case HttpStatus::State::need_more:
          break;
      }
      if (response_.size() >= kResponseBytes) {
        return CheckStep::done(CheckResult::error, "no status line in the first " +
                                                       std::to_string(kResponseBytes) + " bytes");
      }
    }
  }

  CheckAddress target_;
  std::string request_;
  int low_;
  int high_;
  Phase phase_ = Phase::connecting;
  std::size_t sent_ = 0;
  std::string response_;
};

}  // namespace

std::unique_ptr<Check> make_http_check(const CheckAddress& target,
                                       const config::HealthCheckConfig& params) {
  return std::make_unique<HttpCheck>(target, params);
}

}  // namespace ferry::health
