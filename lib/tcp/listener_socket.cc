// Listening TCP sockets for services (see listener_socket.hh).
#include "lib/tcp/listener_socket.hh"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>

#include "lib/common/port_owner.hh"

namespace ferry::tcp {

std::string_view to_string(ListenerMode mode) {
  return mode == ListenerMode::shared ? "shared" : "reuseport";
}

ListenerMode listener_mode_with_env(ListenerMode configured, EnvLookup lookup) {
  lookup = env_or_process(lookup);
  const char* value = lookup("FERRY_TCP_LISTENER");
  if (value == nullptr || *value == '\0') return configured;
  const std::string v(value);
  if (v == "shared") return ListenerMode::shared;
  if (v == "reuseport") return ListenerMode::reuseport;
  throw std::invalid_argument("FERRY_TCP_LISTENER=" + v + ": expected shared or reuseport");
}

UniqueFd open_listener(const net::Endpoint& at, bool reuseport, int backlog) {
  const std::string where = at.to_string();
  auto fail = [&](const char* what, int error) -> std::system_error {
    std::string hint;
    if (error == EADDRINUSE) {
      std::string owner = net::tcp_listener_of(at);
      hint = owner.empty() ? " (another process listens there: `ss -ltnp 'sport = :" +
                                 std::to_string(at.port) + "'` names it)"
                           : " (" + owner + ", listens there)";
    }
    if (error == EADDRNOTAVAIL) hint = " (the address is not configured on this host)";
    if (error == EACCES) hint = " (ports below 1024 need CAP_NET_BIND_SERVICE)";
    return std::system_error(error, std::generic_category(),
                             std::string(what) + " " + where + hint);
  };
  UniqueFd fd(::socket(at.address.is_v4() ? AF_INET : AF_INET6,
                       SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw fail("socket for", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (reuseport && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    throw fail("SO_REUSEPORT on", errno);
  }
  if (!at.address.is_v4()) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  sockaddr_storage storage{};
  const socklen_t len = at.to_sockaddr(storage);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), len) != 0) {
    throw fail("cannot bind", errno);
  }
  if (::listen(fd.get(), backlog) != 0) throw fail("cannot listen on", errno);
  return fd;
}

std::vector<UniqueFd> open_listeners(const net::Endpoint& at, ListenerMode mode,
                                     std::uint32_t count) {
  std::vector<UniqueFd> out;
  const bool reuseport = mode == ListenerMode::reuseport;
  out.push_back(open_listener(at, reuseport));
  if (!reuseport) return out;
  net::Endpoint same = at;
  same.port = bound_endpoint(out.front().get()).port;  // port 0: the rest join the chosen port
  for (std::uint32_t i = 1; i < count; ++i) out.push_back(open_listener(same, true));
  return out;
}

net::Endpoint bound_endpoint(int fd) {
  sockaddr_storage storage{};
  socklen_t len = sizeof(storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) {
    throw std::system_error(errno, std::generic_category(), "getsockname");
  }
  std::optional<net::Endpoint> ep =
      net::Endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&storage), len);
  if (!ep) throw std::runtime_error("getsockname: unexpected address family");
  return *ep;
}

}  // namespace ferry::tcp
