// One worker's share of the UMEM: a disjoint range of frames with a local LIFO free stack, and
// bounds-checked address -> pointer access. Owned by one thread; no locks, no atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace ferry::xsk {

// Whether the slab keeps a map of the frames it has handed out, so that freeing a frame twice is
// caught instead of letting the frame be handed out twice. Costs one byte store per frame on
// alloc and a byte load + store on free (tests/bench/results/xsk-micro.txt has the price); on by
// default, in every build type: a frame handed out twice corrupts packets silently.
enum class OwnershipCheck { on, off };

// Frames rejected by UmemSlab::free, by reason; each is a bug upstream (or a corrupted ring).
struct SlabFreeResult {
  std::uint32_t freed = 0;
  std::uint32_t outside_slab = 0;  // address not in this slab's frame range
  std::uint32_t double_free = 0;   // frame already free (or, without the bitmap, stack overflow)
};

class UmemSlab {
 public:
  // Frames [first_frame, first_frame + frame_count) of `umem`, each `frame_bytes` (a power of
  // two) long. Addresses are byte offsets from the start of `umem`, as in AF_XDP descriptors.
  // Throws std::invalid_argument when the range does not fit.
  UmemSlab(std::span<std::byte> umem, std::uint32_t frame_bytes, std::uint32_t first_frame,
           std::uint32_t frame_count, OwnershipCheck check = OwnershipCheck::on);
  UmemSlab(UmemSlab&&) noexcept = default;
  UmemSlab& operator=(UmemSlab&&) noexcept = default;

  // Pops up to out.size() frame base addresses off the free stack; returns how many.
  std::uint32_t alloc(std::span<std::uint64_t> out);
  // Pushes frames back. Any address inside a frame is accepted (rx descriptors point past the
  // headroom); it is normalised to the frame base. Rejected addresses are counted, not pushed.
  SlabFreeResult free(std::span<const std::uint64_t> addrs);

  // The frame base of any address inside the frame.
  std::uint64_t frame_base(std::uint64_t addr) const { return addr & ~frame_mask_; }
  bool contains(std::uint64_t addr) const { return addr >= begin_addr_ && addr < end_addr_; }
  // Pointer to `len` bytes at `addr`, or nullptr when the bytes are not inside one frame of
  // this slab.
  std::byte* packet(std::uint64_t addr, std::uint32_t len) const {
    if (!contains(addr) || (addr & frame_mask_) + len > frame_mask_ + 1) return nullptr;
    return umem_base_ + addr;
  }
  // Base pointer of the frame holding `addr`, or nullptr outside the slab.
  std::byte* frame(std::uint64_t addr) const {
    return contains(addr) ? umem_base_ + frame_base(addr) : nullptr;
  }
  // A handover: the free stack becomes exactly `free_addrs` (frame bases, as another ferryd's
  // slab over the same frames had them) and every other frame is out, in a ring or in flight.
  // Throws std::invalid_argument (nothing changed) for an address outside the slab, not a frame
  // base, or given twice.
  void restore_free(std::span<const std::uint64_t> free_addrs);
  // The free stack, bottom first: what a handover passes on.
  std::span<const std::uint64_t> free_frames() const { return {stack_.get(), top_}; }

  // True when the frame holding `addr` is on the free stack (needs OwnershipCheck::on).
  bool is_free(std::uint64_t addr) const;

  std::uint32_t free_count() const { return top_; }
  std::uint32_t frame_count() const { return frame_count_; }
  std::uint32_t frame_bytes() const { return static_cast<std::uint32_t>(frame_mask_ + 1); }
  std::uint64_t begin_addr() const { return begin_addr_; }
  std::uint64_t end_addr() const { return end_addr_; }
  OwnershipCheck ownership_check() const { return check_; }

 private:
  std::uint32_t frame_index(std::uint64_t base) const {
    return static_cast<std::uint32_t>((base - begin_addr_) >> frame_shift_);
  }

  std::byte* umem_base_ = nullptr;
  std::uint64_t frame_mask_ = 0;
  std::uint32_t frame_shift_ = 0;
  std::uint64_t begin_addr_ = 0;
  std::uint64_t end_addr_ = 0;
  std::uint32_t frame_count_ = 0;
  OwnershipCheck check_ = OwnershipCheck::on;
  // Free stack: stack_[0, top_) are free frame base addresses, the top is the most recently freed
  // (still warm in cache). Sized once at construction.
  std::unique_ptr<std::uint64_t[]> stack_;
  std::uint32_t top_ = 0;
  // One byte per frame, 1 while the frame is out of the free stack. A byte, not a bit: adjacent
  // frames in one word would chain read-modify-writes through store forwarding.
  std::unique_ptr<std::uint8_t[]> out_map_;
};

}  // namespace ferry::xsk
