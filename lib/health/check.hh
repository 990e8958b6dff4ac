// One health check in flight, whatever it speaks (tcp, udp, dns, http): it owns its socket and
// says what it waits for next; the checker owns the socket's place in its epoll and the clock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "lib/config/config.hh"

namespace ferry::health {

// How one check ended; the values of the `result` label of ferry_health_checks_total.
enum class CheckResult : std::uint8_t { ok, refused, timeout, error };
inline constexpr std::size_t kCheckResults = 4;
std::string_view to_string(CheckResult result);

// A result and its reason: "connected", "status 200", "rcode SERVFAIL", "connection refused".
struct CheckOutcome {
  CheckResult result = CheckResult::error;
  std::string reason;
};

// What a check does next: wait for `events` (EPOLLIN, EPOLLOUT) on its socket, or stop.
struct CheckStep {
  std::uint32_t events = 0;  // 0: finished with `outcome`
  CheckOutcome outcome;

  static CheckStep wait(std::uint32_t events) { return {events, {}}; }
  static CheckStep done(CheckResult result, std::string reason) {
    return {0, {result, std::move(reason)}};
  }
  bool finished() const { return events == 0; }
};

class Check {
 public:
  virtual ~Check() = default;
  // Opens the socket and begins. Called once, before anything else.
  virtual CheckStep start() = 0;
  // The socket is ready with `events` (EPOLLERR and EPOLLHUP included).
  virtual CheckStep resume(std::uint32_t events) = 0;
  // Why a check that ran out of timeout_ms in its current step failed.
  virtual std::string timeout_reason(std::uint32_t timeout_ms) const = 0;
  // Valid from a start() that did not finish until the check is destroyed (which closes it).
  int fd() const { return socket_.get(); }

 protected:
  UniqueFd socket_;
};

// A check of an encapsulating service's backend follows the data path: it goes to the VIP, and
// its socket's SO_MARK names the backend's tunnel to bpf/ferry_hc.bpf.c, which puts the packets
// in the outer header the fast path would (tunnel_marks.hh).
struct TunnelRoute {
  std::uint32_t mark = 0;
  net::IpAddress vip;
  bool operator==(const TunnelRoute&) const = default;
};

// Where a check's socket connects, and the SO_MARK it carries (0: none).
struct CheckAddress {
  net::Endpoint endpoint;
  std::uint32_t mark = 0;
};

// The check `params` describe against `backend`'s address and params.port (else its own port);
// with `tunnel`, against the VIP and that port, through the backend's tunnel.
std::unique_ptr<Check> make_check(const config::HealthCheckConfig& params,
                                  const net::Endpoint& backend,
                                  const std::optional<TunnelRoute>& tunnel = std::nullopt);
// Where that check connects.
CheckAddress check_address(const config::HealthCheckConfig& params, const net::Endpoint& backend,
                           const std::optional<TunnelRoute>& tunnel);

std::unique_ptr<Check> make_tcp_check(const CheckAddress& target);
std::unique_ptr<Check> make_udp_check(const CheckAddress& target,
                                      const config::HealthCheckConfig& params);
std::unique_ptr<Check> make_dns_check(const CheckAddress& target,
                                      const config::HealthCheckConfig& params);
std::unique_ptr<Check> make_http_check(const CheckAddress& target,
                                       const config::HealthCheckConfig& params);

// Shared by the types: a non-blocking socket of `type` connecting to `target` (with its mark);
// `err` is 0 (done), EINPROGRESS, or why it failed (then the fd may be invalid); `what` names the
// call that failed ("socket", "SO_MARK", "connect").
UniqueFd connect_socket(const CheckAddress& target, int type, int& err, const char*& what);
// "connection refused" for ECONNREFUSED, strerror otherwise.
std::string describe_errno(int err);
CheckResult result_of_errno(int err);
// SO_ERROR of a socket whose connect finished.
int socket_error(int fd);

}  // namespace ferry::health
