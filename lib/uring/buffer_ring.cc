// A provided-buffer ring: count buffers of buffer_bytes cut from one contiguous area, registered
// with one io_uring as a buffer group, plus the shadow bookkeeping that turns a completion's
// (bid, bytes) into memory spans and gives a buffer back only when both the kernel and the
// consumer are done with it.
#include "lib/uring/buffer_ring.hh"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "lib/uring/uring_compat.hh"

namespace ferry::uring {
namespace {

std::size_t round_to_pages(std::size_t bytes) {
  long page = ::sysconf(_SC_PAGESIZE);
  std::size_t p = static_cast<std::size_t>(page > 0 ? page : 4096);
  return (bytes + p - 1) / p * p;
}

void* map_anonymous(std::size_t bytes, const char* what) {
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("mmap {} bytes for the {}", bytes, what));
  }
  return mem;
}

}  // namespace

BufferRing::BufferRing(Uring& ring, const BufferRingConfig& config)
    : uring_(ring),
      count_(config.count),
      buffer_bytes_(config.buffer_bytes),
      group_id_(config.group_id),
      mask_(static_cast<std::uint16_t>(config.count - 1)) {
  // The kernel cannot tell a full ring from an empty one at 65536 entries, and bids are 16 bits.
  if (count_ == 0 || count_ > 32768 || (count_ & (count_ - 1)) != 0) {
    throw std::invalid_argument(
        fmt::format("buffer ring count {} must be a power of two in 1..32768", count_));
  }
  if (buffer_bytes_ == 0 || buffer_bytes_ > (1u << 30)) {
    throw std::invalid_argument(fmt::format("buffer size {} bytes out of range", buffer_bytes_));
  }

  ring_map_bytes_ = round_to_pages(sizeof(io_uring_buf) * count_);
  area_bytes_ = round_to_pages(static_cast<std::size_t>(count_) * buffer_bytes_);
  ring_ = static_cast<io_uring_buf_ring*>(map_anonymous(ring_map_bytes_, "buffer ring"));
  try {
    area_ = static_cast<std::byte*>(map_anonymous(area_bytes_, "receive buffers"));
  } catch (...) {
    ::munmap(ring_, ring_map_bytes_);
    throw;
  }

  compat::BufRingRegistration reg;
  reg.ring_addr = reinterpret_cast<std::uintptr_t>(ring_);
  reg.ring_entries = count_;
  reg.bgid = group_id_;
  reg.flags = config.incremental ? compat::kPbufRingIncremental : 0;
  int rc = compat::register_buf_ring(uring_.fd(), reg);
  if (rc == -EINVAL && config.incremental) {
    // Kernels before 6.12 do not know IOU_PBUF_RING_INC: whole-buffer consumption instead.
    reg.flags = 0;
    rc = compat::register_buf_ring(uring_.fd(), reg);
  }
  if (rc < 0) {
    ::munmap(area_, area_bytes_);
    ::munmap(ring_, ring_map_bytes_);
    throw std::system_error(-rc, std::generic_category(),
                            fmt::format("register buffer ring group {}", group_id_));
  }
  registered_ = true;
  incremental_ = reg.flags != 0;

  slots_.resize(count_);
  buffers_.resize(count_);
  deferred_.reserve(count_);
  io_uring_buf_ring_init(ring_);
  for (std::uint32_t bid = 0; bid < count_; ++bid) add_at_tail(static_cast<std::uint16_t>(bid));
  (void)publish();
}

BufferRing::~BufferRing() {
  if (registered_) compat::unregister_buf_ring(uring_.fd(), group_id_);
  ::munmap(area_, area_bytes_);
  ::munmap(ring_, ring_map_bytes_);
}

BufferRing::Consumed BufferRing::consume(std::uint16_t bid, std::uint32_t bytes, bool bundle,
                                         bool buf_more, SpanList& out) {
  Consumed c;
  if (bid >= count_ || !buffers_[bid].in_ring) {
    c.status = ConsumeStatus::unknown_buffer;
    return c;
  }
  std::uint16_t pos = buffers_[bid].pos;
  if (bytes == 0) {
    // Mirrors io_kbuf_commit(): an empty transfer still consumes a single whole buffer, while a
    // bundle commits only the buffers the bytes touched and an incremental ring only the bytes.
    if (!bundle && !incremental_) {
      c.buffers = 1;
      c.ring_bytes = slots_[pos & mask_].len;
      free_bytes_ -= std::min(free_bytes_, c.ring_bytes);
      kernel_done(bid, c.given_back);
      c.given_back += publish();
    }
    return c;
  }

  std::uint32_t remaining = bytes;
  bool last_partial = false;
  for (;;) {
    Slot& s = slots_[pos & mask_];
    Buffer& b = buffers_[s.bid];
    if (!s.used || !b.in_ring || b.pos != pos) {
      c.status = ConsumeStatus::overrun;
      break;
    }
    std::uint32_t take = std::min(s.len - s.consumed, remaining);
    if (take > 0) {
      if (out.push(s.addr + s.consumed, take)) {
        ++b.holds;
      } else {
        c.status = ConsumeStatus::span_overflow;
      }
    }
    ++c.buffers;
    remaining -= take;
    if (incremental_) {
      c.ring_bytes += take;
      s.consumed += take;
      last_partial = s.consumed < s.len;
      if (!last_partial) kernel_done(s.bid, c.given_back);
    } else {
      c.ring_bytes += s.len - s.consumed;
      kernel_done(s.bid, c.given_back);
    }
    if (remaining == 0) break;
    if (!bundle || c.buffers >= count_) {
      c.status = ConsumeStatus::overrun;
      break;
    }
    ++pos;
  }
  if (incremental_ && c.status == ConsumeStatus::ok && last_partial != buf_more) {
    c.status = ConsumeStatus::buf_more_mismatch;
  }
  free_bytes_ -= std::min(free_bytes_, c.ring_bytes);
  c.given_back += publish();
  return c;
}

std::uint32_t BufferRing::release(const iovec& span) {
  std::uint32_t given_back = 0;
  auto* p = static_cast<std::byte*>(span.iov_base);
  if (span.iov_len == 0 || p < area_ || p + span.iov_len > area_ + area_bytes_) return 0;
  std::size_t first = static_cast<std::size_t>(p - area_) / buffer_bytes_;
  std::size_t last = static_cast<std::size_t>(p + span.iov_len - 1 - area_) / buffer_bytes_;
  for (std::size_t bid = first; bid <= last && bid < count_; ++bid) {
    Buffer& b = buffers_[bid];
    if (b.holds == 0) continue;  // released twice: a consumer bug, never worth a crash here
    if (--b.holds == 0 && !b.in_ring) give_back(static_cast<std::uint16_t>(bid), given_back);
  }
  return given_back + publish();
}

std::uint32_t BufferRing::release(std::span<const iovec> spans) {
  std::uint32_t given_back = 0;
  for (const iovec& span : spans) given_back += release(span);
  return given_back;
}

void BufferRing::kernel_done(std::uint16_t bid, std::uint32_t& given_back) {
  Buffer& b = buffers_[bid];
  b.in_ring = false;
  free_.add(-1);
  if (b.holds == 0) give_back(bid, given_back);
}

void BufferRing::give_back(std::uint16_t bid, std::uint32_t& given_back) {
  if (deferred_.empty() && add_at_tail(bid)) {
    ++given_back;
  } else {
    deferred_.push_back(bid);
  }
}

bool BufferRing::add_at_tail(std::uint16_t bid) {
  Slot& s = slots_[tail_ & mask_];
  // The slot is reused only after the buffer last written there was resolved; with completions
  // seen in commit order (one reaping thread) this always holds, the check keeps it so.
  if (s.used && s.bid != bid) {
    const Buffer& occupant = buffers_[s.bid];
    if (occupant.in_ring && (occupant.pos & mask_) == (tail_ & mask_)) return false;
  }
  std::byte* addr = area_ + static_cast<std::size_t>(bid) * buffer_bytes_;
  io_uring_buf& entry = ring_->bufs[tail_ & mask_];
  entry.addr = reinterpret_cast<std::uintptr_t>(addr);
  entry.len = buffer_bytes_;
  entry.bid = bid;
  s = Slot{bid, true, addr, buffer_bytes_, 0};
  Buffer& b = buffers_[bid];
  b.pos = tail_;
  b.in_ring = true;
  ++tail_;
  ++added_;
  free_bytes_ += buffer_bytes_;
  free_.add(1);
  return true;
}

std::uint32_t BufferRing::publish() {
  std::size_t added = 0;
  if (!deferred_.empty()) {
    while (added < deferred_.size() && add_at_tail(deferred_[added])) ++added;
    deferred_.erase(deferred_.begin(), deferred_.begin() + static_cast<std::ptrdiff_t>(added));
  }
  if (tail_ != published_tail_) {
    io_uring_smp_store_release(&ring_->tail, tail_);
    published_tail_ = tail_;
  }
  return static_cast<std::uint32_t>(added);
}

}  // namespace ferry::uring
