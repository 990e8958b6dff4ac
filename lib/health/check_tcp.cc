// tcp: the three-way handshake to the backend completes within timeout_ms; then a reset.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

#include "lib/health/check.hh"

namespace ferry::health {
namespace {

class TcpCheck final : public Check {
 public:
  explicit TcpCheck(const CheckAddress& target) : target_(target) {}

  CheckStep start() override {
    int err = 0;
    const char* what = "";
    socket_ = connect_socket(target_, SOCK_STREAM, err, what);
    if (!socket_) {
      return CheckStep::done(CheckResult::error, std::string(what) + ": " + describe_errno(err));
    }
    if (err == 0) return CheckStep::done(CheckResult::ok, "connected");
    if (err != EINPROGRESS) return CheckStep::done(result_of_errno(err), describe_errno(err));
    return CheckStep::wait(EPOLLOUT);
  }

  CheckStep resume(std::uint32_t) override {
    int err = socket_error(socket_.get());
    if (err == 0) return CheckStep::done(CheckResult::ok, "connected");
    return CheckStep::done(result_of_errno(err), describe_errno(err));
  }

  std::string timeout_reason(std::uint32_t timeout_ms) const override {
    return "connect timeout after " + std::to_string(timeout_ms) + " ms";
  }

 private:
  CheckAddress target_;
};

}  // namespace

std::unique_ptr<Check> make_tcp_check(const CheckAddress& target) {
  return std::make_unique<TcpCheck>(target);
}

}  // namespace ferry::health
