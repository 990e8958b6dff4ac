// A connected UDP socket: only the target's address and port can reach it, and the kernel reports
// an ICMP port unreachable for it as ECONNREFUSED on the next recv.
#include "lib/health/check_datagram.hh"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>

namespace ferry::health {
namespace {

// Larger than any expect (1 KiB) and any DNS reply header plus question; the rest is cut.
constexpr std::size_t kReplyBytes = 2048;
// Replies read per readiness event, so a flooding backend cannot hold the checker's loop.
constexpr int kRepliesPerWake = 16;

}  // namespace

CheckStep DatagramCheck::start() {
  int err = 0;
  const char* what = "";
  socket_ = connect_socket(target_, SOCK_DGRAM, err, what);
  if (!socket_) {
    return CheckStep::done(CheckResult::error, std::string(what) + ": " + describe_errno(err));
  }
  if (err != 0) return CheckStep::done(result_of_errno(err), "connect: " + describe_errno(err));
  if (::send(socket_.get(), request_.data(), request_.size(), MSG_DONTWAIT) < 0) {
    err = errno;
    if (err == ECONNREFUSED) return CheckStep::done(CheckResult::refused, "port unreachable");
    return CheckStep::done(CheckResult::error, "send: " + describe_errno(err));
  }
  return CheckStep::wait(EPOLLIN);
}

CheckStep DatagramCheck::resume(std::uint32_t) {
  std::array<std::uint8_t, kReplyBytes> buffer;
  for (int i = 0; i < kRepliesPerWake; ++i) {
    ssize_t n = ::recv(socket_.get(), buffer.data(), buffer.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) break;
      if (err == ECONNREFUSED) {
        return CheckStep::done(CheckResult::refused, "port unreachable (ICMP)");
      }
      return CheckStep::done(CheckResult::error, "recv: " + describe_errno(err));
    }
    std::size_t got = std::min<std::size_t>(static_cast<std::size_t>(n), buffer.size());
    if (auto outcome = judge(std::span(buffer.data(), got))) {
      return CheckStep::done(outcome->result, std::move(outcome->reason));
    }
  }
  return CheckStep::wait(EPOLLIN);
}

std::string DatagramCheck::timeout_reason(std::uint32_t timeout_ms) const {
  std::string reason = "no reply within " + std::to_string(timeout_ms) + " ms";
  if (!ignored_why_.empty()) reason += " (ignored " + ignored_why_ + ")";
  return reason;
}

}  // namespace ferry::health
