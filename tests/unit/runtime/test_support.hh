// Shared helpers of the runtime, TCP and proxy tests: loopback TCP pairs, a countdown the test
// thread can wait on with a deadline, a byte pattern both ends can generate and check, and a
// metric read from a registry.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "lib/common/unique_fd.hh"
#include "lib/metrics/registry.hh"
#include "tests/unit/support/net_support.hh"

namespace ferry::runtime::testing {

// A connected pair over 127.0.0.1 (port 0), both ends blocking, TCP_NODELAY on both.
using test_support::tcp_pair;
using test_support::TcpPair;

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
using test_support::fill_pattern;
using test_support::pattern_byte;
// Offset of the first byte that differs from the pattern, or out.size() when all match.
std::size_t check_pattern(std::uint64_t seed, std::uint64_t offset, std::span<const std::byte> in);

// The sum of family `name`'s samples that carry every label in `labels`; -1 when none does.
double metric(const metrics::Registry& registry, const std::string& name,
              const metrics::Labels& labels = {});

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
