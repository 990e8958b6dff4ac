// The QUIC test server's one UDP socket (non-blocking, bound to one IPv4 or IPv6 address) and the
// socket addresses it sends to and receives from.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"

namespace ferry::quic_test {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;

  static SocketAddress from(const sockaddr* sa, socklen_t len);
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
  std::string to_string() const;  // "10.0.0.1:4433", "[fd00::1]:4433"
  bool operator==(const SocketAddress& other) const;
};

enum class SendResult { sent, blocked, failed };

class UdpSocket {
 public:
  // Binds `listen`, which must name one address (a wildcard would leave the local side of a
  // path unknown). Throws std::system_error or std::invalid_argument.
  explicit UdpSocket(const net::Endpoint& listen);

  int fd() const { return fd_.get(); }
  const SocketAddress& local() const { return local_; }

  // The next datagram's size (its sender in `from`), or nullopt when none is queued.
  std::optional<std::size_t> receive(std::span<std::uint8_t> buffer, SocketAddress& from);
  SendResult send_to(const sockaddr* to, socklen_t to_len, std::span<const std::uint8_t> data);

 private:
  UniqueFd fd_;
  SocketAddress local_;
};

}  // namespace ferry::quic_test
