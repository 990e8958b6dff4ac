// Shared helpers of the runtime and TCP tests (see test_support.hh).
#include "tests/unit/runtime/test_support.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ferry::runtime::testing {
namespace {

[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

void Countdown::count(std::size_t n) {
  std::lock_guard lock(mutex_);
  remaining_ = n > remaining_ ? 0 : remaining_ - n;
  if (remaining_ == 0) cv_.notify_all();
}

bool Countdown::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [this] { return remaining_ == 0; });
}

std::size_t Countdown::remaining() const {
  std::lock_guard lock(mutex_);
  return remaining_;
}

std::size_t check_pattern(std::uint64_t seed, std::uint64_t offset, std::span<const std::byte> in) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != pattern_byte(seed, offset + i)) return i;
  }
  return in.size();
}

void write_all(int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void read_exact(int fd, std::span<std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::read(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      errno = ECONNRESET;
      fail("read: unexpected EOF");
    }
    if (n < 0) fail("read");
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void exchange(int fd, std::span<const std::byte> out, std::span<std::byte> in,
              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t sent = 0;
  std::size_t got = 0;
  while (got < in.size() || sent < out.size()) {
    pollfd p{fd, 0, 0};
    if (sent < out.size()) p.events |= POLLOUT;
    if (got < in.size()) p.events |= POLLIN;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      errno = ETIMEDOUT;
      fail("exchange");
    }
    const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) fail("poll");
    if ((p.revents & POLLOUT) != 0) {
      const ssize_t n =
          ::send(fd, out.data() + sent, out.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) fail("send");
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && got < in.size()) {
      const ssize_t n = ::recv(fd, in.data() + got, in.size() - got, MSG_DONTWAIT);
      if (n == 0) {
        errno = ECONNRESET;
        fail("exchange: unexpected EOF");
      }
      if (n > 0) got += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) fail("recv");
    }
  }
}

UniqueFd connect_loopback(std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) fail("connect");
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

double metric(const metrics::Registry& registry, const std::string& name,
              const metrics::Labels& labels) {
  double sum = 0;
  bool found = false;
  for (const metrics::Family& f : registry.snapshot()) {
    if (f.name != name) continue;
    for (const metrics::Sample& s : f.samples) {
      bool match = true;
      for (const auto& l : labels) {
        bool has = false;
        for (const auto& sl : s.labels) has = has || sl == l;
        match = match && has;
      }
      if (match) {
        sum += s.value;
        found = true;
      }
    }
  }
  return found ? sum : -1;
}

}  // namespace ferry::runtime::testing
