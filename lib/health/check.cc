// The check factory and the socket helpers every check type shares.
#include "lib/health/check.hh"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ferry::health {

std::string_view to_string(CheckResult result) {
  switch (result) {
    case CheckResult::ok:
      return "ok";
    case CheckResult::refused:
      return "refused";
    case CheckResult::timeout:
      return "timeout";
    case CheckResult::error:
      return "error";
  }
  return "error";
}

std::unique_ptr<Check> make_check(const config::HealthCheckConfig& params,
                                  const net::Endpoint& backend) {
  net::Endpoint target = backend;
  if (params.port) target.port = *params.port;
  switch (params.type) {
    case config::HealthCheckType::tcp:
      return make_tcp_check(target);
    case config::HealthCheckType::udp:
      return make_udp_check(target, params);
    case config::HealthCheckType::dns:
      return make_dns_check(target, params);
    case config::HealthCheckType::http:
      return make_http_check(target, params);
  }
  return make_tcp_check(target);
}

UniqueFd connect_socket(const net::Endpoint& target, int type, int& err) {
  sockaddr_storage addr{};
  socklen_t len = target.to_sockaddr(addr);
  UniqueFd fd(::socket(addr.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    err = errno;
    return fd;
  }
  if (type == SOCK_STREAM) {
    // A check that connected ends with RST, not FIN: no TIME_WAIT piles up per backend and check.
    linger abort{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  }
  err = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0 ? 0 : errno;
  return fd;
}

std::string describe_errno(int err) {
  if (err == ECONNREFUSED) return "connection refused";
  return std::strerror(err);
}

CheckResult result_of_errno(int err) {
  return err == ECONNREFUSED ? CheckResult::refused : CheckResult::error;
}

int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  return err;
}

}  // namespace ferry::health
