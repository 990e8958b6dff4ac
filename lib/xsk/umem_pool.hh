// The one UMEM of the daemon: the mapping plus its single registration with the kernel
// (xsk_umem__create). The registration's fill and completion rings belong to the first queue.
#pragma once

#include <xdp/xsk.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "lib/xsk/umem_area.hh"
#include "lib/xsk/umem_slab.hh"

namespace ferry::xsk {

struct UmemConfig {
  std::uint32_t frame_count = 16384;
  std::uint32_t frame_bytes = 4096;   // power of two, 2048..page size (aligned chunk mode)
  std::uint32_t headroom_bytes = 0;   // reserved by the kernel in front of every received packet
  std::uint32_t fill_entries = 4096;  // per queue, power of two
  std::uint32_t completion_entries = 2048;  // per queue, power of two
  HugePages hugepages = HugePages::automatic;
};

class UmemPool {
 public:
  // Maps and registers. Throws std::system_error saying what to change.
  explicit UmemPool(const UmemConfig& config);
  // The UMEM another ferryd registered and handed over (lib/handover): its memfd is mapped, and
  // the registration is the kernel's, held by the handed-over sockets; nothing is registered here.
  UmemPool(const UmemConfig& config, UniqueFd memfd, bool hugepages);
  // Unregisters, then unmaps. Every socket on the UMEM must be gone first (SharedUmem sees to it).
  ~UmemPool();
  UmemPool(const UmemPool&) = delete;
  UmemPool& operator=(const UmemPool&) = delete;

  // Slab `index` of `count` equal slabs: frames [index * n, (index + 1) * n), n = frames / count.
  // The slab points into this pool's memory and must not outlive it.
  UmemSlab make_slab(std::uint32_t index, std::uint32_t count,
                     OwnershipCheck check = OwnershipCheck::on) const;

  // Drops the registration and registers the same memory again. libxdp leaves the UMEM's own
  // socket half-configured after a failed first bind (rings set, not bound), so a retry on it
  // would fail; a fresh registration makes the next first bind clean. No socket may exist.
  void reregister();

  // Null for a handed-over UMEM.
  xsk_umem* handle() const { return umem_; }
  int memfd() const { return area_.memfd(); }
  const UmemConfig& config() const { return config_; }
  std::span<std::byte> bytes() const { return area_.bytes(); }
  bool on_hugepages() const { return area_.on_hugepages(); }

  // The fill/completion rings created with the registration; libxdp hands them to the first
  // socket and keeps pointing at them until that socket is deleted, so they live here, in place.
  xsk_ring_prod* first_fill() { return &first_rings_->fill; }
  xsk_ring_cons* first_completion() { return &first_rings_->completion; }

 private:
  struct FirstRings {
    xsk_ring_prod fill{};
    xsk_ring_cons completion{};
  };
  void register_area();
  // Why a registration ran out of locked memory, and what to change.
  std::string memlock_advice() const;
  bool unregister();

  UmemConfig config_;
  UmemArea area_;
  std::unique_ptr<FirstRings> first_rings_;
  xsk_umem* umem_ = nullptr;
};

}  // namespace ferry::xsk
