// Shared helpers of the runtime and TCP tests: loopback TCP pairs, a countdown the test thread
// can wait on with a deadline, and a byte pattern both ends can generate and check.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>

#include "lib/common/unique_fd.hh"

namespace ferry::runtime::testing {

struct TcpPair {
  UniqueFd client;
  UniqueFd server;
};
// A connected pair over 127.0.0.1 (port 0), both ends blocking, TCP_NODELAY on the client.
TcpPair tcp_pair();

// Counts events from any thread; the test thread waits until `target` were counted.
class Countdown {
 public:
  explicit Countdown(std::size_t target) : remaining_(target) {}
  void count(std::size_t n = 1);
  // False when the deadline passed first.
  bool wait_for(std::chrono::milliseconds timeout);
  std::size_t remaining() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t remaining_;
};

// The byte at stream offset i is a function of (seed, i).
std::byte pattern_byte(std::uint64_t seed, std::uint64_t offset);
void fill_pattern(std::uint64_t seed, std::uint64_t offset, std::span<std::byte> out);
// Offset of the first byte that differs from the pattern, or out.size() when all match.
std::size_t check_pattern(std::uint64_t seed, std::uint64_t offset, std::span<const std::byte> in);

// write()/read() until every byte moved; throw std::system_error on failure or EOF.
void write_all(int fd, std::span<const std::byte> bytes);
void read_exact(int fd, std::span<std::byte> bytes);
// Writes `out` and reads `in.size()` bytes back at the same time (poll), so messages larger
// than the socket buffers cannot deadlock against an echo. Throws on error, EOF or `timeout`.
void exchange(int fd, std::span<const std::byte> out, std::span<std::byte> in,
              std::chrono::milliseconds timeout = std::chrono::seconds(30));
// Connects a blocking TCP socket (TCP_NODELAY) to 127.0.0.1:port; throws on failure.
UniqueFd connect_loopback(std::uint16_t port);

}  // namespace ferry::runtime::testing
