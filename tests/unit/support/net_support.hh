// Helpers every socket-level unit test shares: a connected loopback TCP pair and a byte pattern
// both ends can generate from (seed, offset) alone, so a receiver checks bytes nobody told it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lib/common/unique_fd.hh"

namespace ferry::test_support {

struct TcpPair {
  UniqueFd client;  // the connecting (sending) side
  UniqueFd server;  // the accepted (receiving) side
};
// A connected pair over 127.0.0.1 (port 0), both ends blocking, TCP_NODELAY on both. Throws
// std::system_error on failure.
TcpPair tcp_pair();

// SplitMix64's finalizer: a well-mixed 64-bit word from any counter.
std::uint64_t splitmix64(std::uint64_t x);

// The byte at stream offset i is a function of (seed, i).
std::byte pattern_byte(std::uint64_t seed, std::uint64_t offset);
void fill_pattern(std::uint64_t seed, std::uint64_t offset, std::span<std::byte> out);

}  // namespace ferry::test_support
