// The QUIC test server's UDP socket (see udp_socket.hh).
#include "tests/quic/udp_socket.hh"

#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace ferry::quic_test {

SocketAddress SocketAddress::from(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  a.len = std::min<socklen_t>(len, sizeof(a.storage));
  std::memcpy(&a.storage, sa, a.len);
  return a;
}

std::string SocketAddress::to_string() const {
  auto endpoint = net::Endpoint::from_sockaddr(get(), len);
  return endpoint ? endpoint->to_string() : std::string("?");
}

bool SocketAddress::operator==(const SocketAddress& other) const {
  auto a = net::Endpoint::from_sockaddr(get(), len);
  auto b = net::Endpoint::from_sockaddr(other.get(), other.len);
  return a && b && *a == *b;
}

UdpSocket::UdpSocket(const net::Endpoint& listen) {
  if (listen.address == net::IpAddress{.family = listen.address.family}) {
    throw std::invalid_argument("--listen " + listen.to_string() +
                                ": give the server's own address, not a wildcard");
  }
  int family = listen.address.family;
  fd_.reset(::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd_) throw std::system_error(errno, std::generic_category(), "socket");
  if (family == AF_INET6) {
    int on = 1;
    ::setsockopt(fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
  }
  local_.len = listen.to_sockaddr(local_.storage);
  if (::bind(fd_.get(), local_.get(), local_.len) != 0) {
    throw std::system_error(errno, std::generic_category(), "bind " + listen.to_string());
  }
  local_.len = sizeof(local_.storage);
  ::getsockname(fd_.get(), local_.get(), &local_.len);  // the port the kernel picked for 0
}

std::optional<std::size_t> UdpSocket::receive(std::span<std::uint8_t> buffer, SocketAddress& from) {
  for (;;) {
    from.len = sizeof(from.storage);
    ssize_t n = ::recvfrom(fd_.get(), buffer.data(), buffer.size(), 0, from.get(), &from.len);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    // EAGAIN: drained. Anything else (an ICMP error reported on the socket) ends this batch too.
    return std::nullopt;
  }
}

SendResult UdpSocket::send_to(const sockaddr* to, socklen_t to_len,
                              std::span<const std::uint8_t> data) {
  for (;;) {
    if (::sendto(fd_.get(), data.data(), data.size(), 0, to, to_len) >= 0) return SendResult::sent;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return SendResult::blocked;
    return SendResult::failed;  // e.g. no route after the client's address went away: a lost packet
  }
}

}  // namespace ferry::quic_test
