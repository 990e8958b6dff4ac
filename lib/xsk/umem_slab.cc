// One worker's share of the UMEM: a disjoint range of frames with a local LIFO free stack.
#include "lib/xsk/umem_slab.hh"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry::xsk {

UmemSlab::UmemSlab(std::span<std::byte> umem, std::uint32_t frame_bytes, std::uint32_t first_frame,
                   std::uint32_t frame_count, OwnershipCheck check)
    : umem_base_(umem.data()),
      frame_mask_(frame_bytes - 1ull),
      frame_shift_(static_cast<std::uint32_t>(std::countr_zero(frame_bytes))),
      begin_addr_(std::uint64_t{first_frame} * frame_bytes),
      end_addr_((std::uint64_t{first_frame} + frame_count) * frame_bytes),
      frame_count_(frame_count),
      check_(check) {
  if (!std::has_single_bit(frame_bytes)) {
    throw std::invalid_argument("frame_bytes must be a power of two, got " +
                                std::to_string(frame_bytes));
  }
  if (frame_count == 0 || end_addr_ > umem.size()) {
    throw std::invalid_argument("slab frames [" + std::to_string(first_frame) + ", " +
                                std::to_string(std::uint64_t{first_frame} + frame_count) +
                                ") do not fit a UMEM of " + std::to_string(umem.size()) + " bytes");
  }
  stack_ = std::make_unique<std::uint64_t[]>(frame_count + 1ull);  // + the spare slot of free()
  for (std::uint32_t i = 0; i < frame_count; ++i)
    stack_[i] = begin_addr_ + std::uint64_t{i} * frame_bytes;
  top_ = frame_count;
  if (check_ == OwnershipCheck::on) {
    out_map_ = std::make_unique<std::uint8_t[]>(frame_count);  // zeroed: all free
  }
}

std::uint32_t UmemSlab::alloc(std::span<std::uint64_t> out) {
  std::uint32_t n = std::min(top_, static_cast<std::uint32_t>(out.size()));
  if (n == 0) return 0;
  top_ -= n;
  std::memcpy(out.data(), stack_.get() + top_, n * sizeof(std::uint64_t));
  if (check_ == OwnershipCheck::on) {
    std::uint8_t* out_map = out_map_.get();
    const std::uint64_t begin = begin_addr_;
    const std::uint32_t shift = frame_shift_;
    // Read the stack, not `out`: `out` was just written by memcpy, and loads right behind its
    // wide (possibly overlapping) stores can miss store forwarding.
    const std::uint64_t* taken = stack_.get() + top_;
    for (std::uint32_t i = 0; i < n; ++i) out_map[(taken[i] - begin) >> shift] = 1;
  }
  return n;
}

SlabFreeResult UmemSlab::free(std::span<const std::uint64_t> addrs) {
  // Branch-free per frame: the stack slot at the top is always written and the top advances
  // only for an accepted frame (the stack has one spare slot for that store). Members are copied
  // to locals, as stores into the stack could alias them and force a reload per frame.
  const std::uint64_t begin = begin_addr_;
  const std::uint64_t slab_bytes = end_addr_ - begin;
  const std::uint64_t base_mask = ~frame_mask_;
  const std::uint32_t shift = frame_shift_;
  std::uint64_t* stack = stack_.get();
  std::uint32_t top = top_;
  std::uint32_t outside = 0, twice = 0;
  if (check_ == OwnershipCheck::on && top + addrs.size() <= frame_count_) {
    // Every frame gets its own slot above the top, so no store address waits on a map load;
    // rejected frames leave a hole that is squeezed out afterwards (only ever after a bug).
    constexpr std::uint64_t kHole = ~0ull;
    std::uint8_t* out_map = out_map_.get();
    std::uint64_t* slot = stack + top;
    for (std::uint64_t addr : addrs) {
      std::uint64_t offset = addr - begin;
      bool inside = offset < slab_bytes;
      std::uint64_t f = inside ? offset >> shift : 0;
      std::uint8_t was_out = out_map[f];
      bool accept = inside && was_out;
      out_map[f] = was_out & !accept;
      *slot++ = accept ? begin + (offset & base_mask) : kHole;
      outside += !inside;
      twice += inside && !accept;
    }
    if (outside + twice == 0) {
      top += static_cast<std::uint32_t>(addrs.size());
    } else {
      for (std::uint64_t* p = stack + top; p != slot; ++p) {
        if (*p != kHole) stack[top++] = *p;
      }
    }
  } else if (check_ == OwnershipCheck::on) {
    std::uint8_t* out_map = out_map_.get();
    for (std::uint64_t addr : addrs) {
      std::uint64_t offset = addr - begin;
      bool inside = offset < slab_bytes;
      std::uint64_t f = inside ? offset >> shift : 0;
      std::uint8_t was_out = out_map[f];
      bool accept = inside && was_out;
      out_map[f] = was_out & !accept;
      stack[top] = begin + (offset & base_mask);
      top += accept;
      outside += !inside;
      twice += inside && !accept;
    }
  } else if (top + addrs.size() <= frame_count_) {
    for (std::uint64_t addr : addrs) {
      std::uint64_t offset = addr - begin;
      bool inside = offset < slab_bytes;
      stack[top] = begin + (offset & base_mask);
      top += inside;
      outside += !inside;
    }
  } else {
    const std::uint32_t capacity = frame_count_;
    for (std::uint64_t addr : addrs) {
      std::uint64_t offset = addr - begin;
      bool inside = offset < slab_bytes;
      bool room = top < capacity;  // more frees than frames: one of them was a double free
      stack[top] = begin + (offset & base_mask);
      top += inside && room;
      outside += !inside;
      twice += inside && !room;
    }
  }
  SlabFreeResult result;
  result.freed = top - top_;
  result.outside_slab = outside;
  result.double_free = twice;
  top_ = top;
  return result;
}

void UmemSlab::restore_free(std::span<const std::uint64_t> free_addrs) {
  if (free_addrs.size() > frame_count_) {
    throw std::invalid_argument("more free frames than the slab has");
  }
  std::vector<std::uint8_t> seen(frame_count_, 0);
  for (std::uint64_t addr : free_addrs) {
    if (!contains(addr) || frame_base(addr) != addr) {
      throw std::invalid_argument("free frame " + std::to_string(addr) +
                                  " is not a frame of slab [" + std::to_string(begin_addr_) + ", " +
                                  std::to_string(end_addr_) + ")");
    }
    if (seen[frame_index(addr)]++) {
      throw std::invalid_argument("free frame " + std::to_string(addr) + " given twice");
    }
  }
  if (!free_addrs.empty()) {
    std::memcpy(stack_.get(), free_addrs.data(), free_addrs.size() * sizeof(std::uint64_t));
  }
  top_ = static_cast<std::uint32_t>(free_addrs.size());
  if (check_ == OwnershipCheck::on) {
    for (std::uint32_t i = 0; i < frame_count_; ++i) out_map_[i] = seen[i] ? 0 : 1;
  }
}

bool UmemSlab::is_free(std::uint64_t addr) const {
  if (!contains(addr) || check_ != OwnershipCheck::on) return false;
  return out_map_[frame_index(frame_base(addr))] == 0;
}

}  // namespace ferry::xsk
