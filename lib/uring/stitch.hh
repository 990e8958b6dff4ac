// For consumers that need received bytes contiguous (a parser, a fixed-size record): use them in
// place when the spans are adjacent in memory, else copy ("stitch") them and count the copy.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <span>

#include "lib/metrics/registry.hh"

namespace ferry::uring {

// How many contiguous memory runs `spans` form when adjacent neighbours are joined.
std::size_t contiguous_runs(std::span<const iovec> spans);

// The bytes of `spans` as one range: in place when they form one run, else copied into `scratch`
// with the copied bytes added to `stitched_bytes`. Empty when the total does not fit `scratch`.
std::span<const std::byte> contiguous(std::span<const iovec> spans, std::span<std::byte> scratch,
                                      metrics::Counter& stitched_bytes);

}  // namespace ferry::uring
