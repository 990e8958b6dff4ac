// Test fixtures for lib/uring: TCP loopback pairs, a position-addressable byte stream both ends
// can generate and verify, and a small event loop that routes completions to RecvSockets.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "lib/common/unique_fd.hh"
#include "lib/uring/buffer_ring.hh"
#include "lib/uring/recv_counters.hh"
#include "lib/uring/recv_engine.hh"
#include "lib/uring/uring.hh"
#include "tests/unit/support/net_support.hh"

namespace ferry::uring::testing {

using test_support::tcp_pair;  // client = the sending side, server = the receiving side
using test_support::TcpPair;

// The byte at stream offset i is a function of (seed, i): the receiver checks every byte without
// the sender telling it anything.
inline std::byte stream_byte(std::uint64_t seed, std::uint64_t offset) {
  return test_support::pattern_byte(seed, offset);
}
inline void fill_stream(std::uint64_t seed, std::uint64_t offset, std::span<std::byte> out) {
  test_support::fill_pattern(seed, offset, out);
}

// FNV-1a, fed incrementally, for an end-to-end checksum next to the byte-wise check.
struct Fnv1a {
  std::uint64_t value = 14695981039346656037ull;
  void add(std::span<const std::byte> bytes);
};

// Writes `sizes.size()` messages of the given sizes as one stream; returns the checksum.
std::uint64_t send_stream(int fd, std::uint64_t seed, const std::vector<std::size_t>& sizes);

// Verifies received bytes against the stream at the running offset.
struct StreamVerifier {
  explicit StreamVerifier(std::uint64_t seed) : seed(seed) {}
  std::uint64_t seed;
  std::uint64_t offset = 0;
  std::uint64_t mismatches = 0;
  Fnv1a checksum;
  void check(std::span<const iovec> spans);
};

// One worker's receive path over a real io_uring, for tests.
class RecvHarness {
 public:
  RecvHarness(const BufferRingConfig& geometry, const RecvModes& modes,
              const RecvLimits& limits = {});

  Uring ring;
  BufferRing buffers;
  RecvCounters counters;
  RecvEngine engine;

  using Handler = std::function<void(RecvSocket&, const RecvEvent&)>;
  void watch(RecvSocket& socket, Handler handler);
  // Submits, waits and dispatches completions until `done()` holds; false on timeout.
  bool run_until(const std::function<bool()>& done,
                 std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Dispatches whatever completes within `wait`; returns the number of recv completions seen.
  unsigned run_for(std::chrono::milliseconds wait);

  std::uint64_t max_outstanding_gap = 0;  // max(submitted - ended) over every socket and event

 private:
  unsigned dispatch();
  std::unordered_map<std::uint64_t, std::pair<RecvSocket*, Handler>> sockets_;
};

}  // namespace ferry::uring::testing
