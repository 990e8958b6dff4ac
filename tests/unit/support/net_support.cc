// Helpers every socket-level unit test shares (see net_support.hh).
#include "tests/unit/support/net_support.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <system_error>

namespace ferry::test_support {
namespace {

[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

TcpPair tcp_pair() {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) fail("bind");
  if (::listen(listener.get(), 1) != 0) fail("listen");
  socklen_t len = sizeof(addr);
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    fail("getsockname");
  }
  TcpPair pair;
  pair.client.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!pair.client) fail("socket");
  if (::connect(pair.client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    fail("connect");
  }
  pair.server.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!pair.server) fail("accept");
  int one = 1;
  ::setsockopt(pair.client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(pair.server.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return pair;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::byte pattern_byte(std::uint64_t seed, std::uint64_t offset) {
  const std::uint64_t word = splitmix64(seed ^ (offset / 8) * 0x100000001b3ull);
  return static_cast<std::byte>(word >> (8 * (offset % 8)));
}

void fill_pattern(std::uint64_t seed, std::uint64_t offset, std::span<std::byte> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = pattern_byte(seed, offset + i);
}

}  // namespace ferry::test_support
