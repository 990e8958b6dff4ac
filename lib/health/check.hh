// One health check in flight, whatever it speaks (tcp, udp, dns, http): it owns its socket and
// says what it waits for next; the checker owns the socket's place in its epoll and the clock.
#pragma once

#include <cstdint>
#include <memory>
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

// The check `params` describe against `backend`'s address and params.port (else its own port).
std::unique_ptr<Check> make_check(const config::HealthCheckConfig& params,
                                  const net::Endpoint& backend);

std::unique_ptr<Check> make_tcp_check(const net::Endpoint& target);
std::unique_ptr<Check> make_udp_check(const net::Endpoint& target,
                                      const config::HealthCheckConfig& params);
std::unique_ptr<Check> make_dns_check(const net::Endpoint& target,
                                      const config::HealthCheckConfig& params);
std::unique_ptr<Check> make_http_check(const net::Endpoint& target,
                                       const config::HealthCheckConfig& params);

// Shared by the types: a non-blocking socket of `type` connecting to `target`; `err` is 0 (done),
// EINPROGRESS, or why it failed (then the fd may be invalid).
UniqueFd connect_socket(const net::Endpoint& target, int type, int& err);
// "connection refused" for ECONNREFUSED, strerror otherwise.
std::string describe_errno(int err);
CheckResult result_of_errno(int err);
// SO_ERROR of a socket whose connect finished.
int socket_error(int fd);

}  // namespace ferry::health
