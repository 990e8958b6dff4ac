// For consumers that need received bytes contiguous (a parser, a fixed-size record): use them in
// place when the spans are adjacent in memory, else copy ("stitch") them and count the copy.
#include "lib/uring/stitch.hh"

#include <cstring>

namespace ferry::uring {

std::size_t contiguous_runs(std::span<const iovec> spans) {
  std::size_t runs = 0;
  const std::byte* end = nullptr;
  for (const iovec& s : spans) {
    if (s.iov_len == 0) continue;
    const auto* base = static_cast<const std::byte*>(s.iov_base);
    if (base != end) ++runs;
    end = base + s.iov_len;
  }
  return runs;
}

std::span<const std::byte> contiguous(std::span<const iovec> spans, std::span<std::byte> scratch,
                                      metrics::Counter& stitched_bytes) {
  std::size_t total = 0;
  const std::byte* first = nullptr;
  for (const iovec& s : spans) {
    if (s.iov_len == 0) continue;
    if (first == nullptr) first = static_cast<const std::byte*>(s.iov_base);
    total += s.iov_len;
  }
  if (total == 0) return {};
  if (contiguous_runs(spans) == 1) return {first, total};
  if (total > scratch.size()) return {};
  std::size_t at = 0;
  for (const iovec& s : spans) {
    std::memcpy(scratch.data() + at, s.iov_base, s.iov_len);
    at += s.iov_len;
  }
  stitched_bytes.add(total);
  return {scratch.data(), total};
}

}  // namespace ferry::uring
