// Test fixtures for lib/uring: TCP loopback pairs, a position-addressable byte stream both ends
// can generate and verify, and a small event loop that routes completions to RecvSockets.
#include "tests/unit/uring/loopback.hh"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace ferry::uring::testing {
namespace {

[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

void Fnv1a::add(std::span<const std::byte> bytes) {
  for (std::byte b : bytes) {
    value ^= static_cast<std::uint8_t>(b);
    value *= 1099511628211ull;
  }
}

std::uint64_t send_stream(int fd, std::uint64_t seed, const std::vector<std::size_t>& sizes) {
  Fnv1a sum;
  std::vector<std::byte> message;
  std::uint64_t offset = 0;
  for (std::size_t size : sizes) {
    message.resize(size);
    fill_stream(seed, offset, message);
    sum.add(message);
    std::size_t sent = 0;
    while (sent < size) {
      ssize_t n = ::send(fd, message.data() + sent, size - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("send");
      sent += static_cast<std::size_t>(n);
    }
    offset += size;
  }
  return sum.value;
}

void StreamVerifier::check(std::span<const iovec> spans) {
  for (const iovec& s : spans) {
    std::span<const std::byte> bytes(static_cast<const std::byte*>(s.iov_base), s.iov_len);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != stream_byte(seed, offset + i)) ++mismatches;
    }
    checksum.add(bytes);
    offset += bytes.size();
  }
}

RecvHarness::RecvHarness(const BufferRingConfig& geometry, const RecvModes& modes,
                         const RecvLimits& limits)
    : ring(UringParams{}),
      buffers(ring, geometry),
      engine(ring, buffers, modes, counters, limits) {}

void RecvHarness::watch(RecvSocket& socket, Handler handler) {
  sockets_[socket.user_data()] = {&socket, std::move(handler)};
}

unsigned RecvHarness::dispatch() {
  unsigned seen = 0;
  ring.drain([&](const io_uring_cqe& cqe) {
    if (cqe.user_data == kIgnoredUserData) return;
    auto it = sockets_.find(cqe.user_data);
    if (it == sockets_.end()) throw std::logic_error("completion for an unknown socket");
    RecvSocket& socket = *it->second.first;
    RecvEvent event = engine.handle(socket, cqe);
    ++seen;
    if (it->second.second) it->second.second(socket, event);
    for (const auto& [tag, entry] : sockets_) {
      const RecvSocket& s = *entry.first;
      max_outstanding_gap = std::max(max_outstanding_gap, s.recvs_submitted() - s.recvs_ended());
    }
  });
  return seen;
}

bool RecvHarness::run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    int rc = ring.submit_and_wait(1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (rc < 0 && rc != -ETIME) throw std::system_error(-rc, std::generic_category(), "wait");
    dispatch();
  }
  return true;
}

unsigned RecvHarness::run_for(std::chrono::milliseconds wait) {
  int rc = ring.submit_and_wait(1, static_cast<int>(wait.count()));
  if (rc < 0 && rc != -ETIME) throw std::system_error(-rc, std::generic_category(), "wait");
  return dispatch();
}

}  // namespace ferry::uring::testing
