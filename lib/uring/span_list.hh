// The bytes of one receive completion as a short list of memory spans (iovecs, ready for
// sendmsg/writev), merged wherever consecutive buffers are adjacent in memory.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ferry::uring {

class SpanList {
 public:
  // Storage is allocated here, once: a completion never has more spans than the ring has buffers.
  explicit SpanList(std::size_t capacity) : spans_(capacity) {}

  void clear() noexcept {
    size_ = 0;
    bytes_ = 0;
  }
  // Appends [data, data + n), extending the last span when it ends exactly at `data`.
  // Returns false only when the list is full (the caller's capacity was wrong).
  bool push(std::byte* data, std::uint32_t n) noexcept {
    if (size_ > 0) {
      iovec& last = spans_[size_ - 1];
      if (static_cast<std::byte*>(last.iov_base) + last.iov_len == data) {
        last.iov_len += n;
        bytes_ += n;
        return true;
      }
    }
    if (size_ == spans_.size()) return false;
    spans_[size_++] = iovec{data, n};
    bytes_ += n;
    return true;
  }

  std::span<const iovec> view() const noexcept { return {spans_.data(), size_}; }
  std::size_t size() const noexcept { return size_; }
  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  std::vector<iovec> spans_;
  std::size_t size_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace ferry::uring
