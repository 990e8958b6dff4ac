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

CheckAddress check_address(const config::HealthCheckConfig& params, const net::Endpoint& backend,
                           const std::optional<TunnelRoute>& tunnel) {
  CheckAddress target{backend, 0};
  if (tunnel) target = {{tunnel->vip, backend.port}, tunnel->mark};
  if (params.port) target.endpoint.port = *params.port;
  return target;
}

std::unique_ptr<Check> make_check(const config::HealthCheckConfig& params,
                                  const net::Endpoint& backend,
                                  const std::optional<TunnelRoute>& tunnel) {
  CheckAddress target = check_address(params, backend, tunnel);
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

UniqueFd connect_socket(const CheckAddress& target, int type, int& err, const char*& what) {
  sockaddr_storage addr{};
  socklen_t len = target.endpoint.to_sockaddr(addr);
  what = "socket";
  UniqueFd fd(::socket(addr.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    err = errno;
    return fd;
  }
  // The mark is what routes the check into its backend's tunnel; without it (no CAP_NET_ADMIN)
  // the check would test the VIP's route instead, so it fails here.
  if (target.mark != 0 &&
      ::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &target.mark, sizeof(target.mark)) != 0) {
    err = errno;
    what = "SO_MARK";
    return {};
  }
  if (type == SOCK_STREAM) {
    // A check that connected ends with RST, not FIN: no TIME_WAIT piles up per backend and check.
    linger abort{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  }
  what = "connect";
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
