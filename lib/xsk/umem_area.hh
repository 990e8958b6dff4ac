// The UMEM's memory: one shared mapping of a memfd, populated up front, optionally on hugepages.
// A memfd, so that a new ferryd taking over (lib/handover) maps the very pages the kernel
// writes into. Unmapped exactly once, after the UMEM registration that pins it is gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lib/common/unique_fd.hh"

namespace ferry::xsk {

enum class HugePages { automatic, on, off };

class UmemArea {
 public:
  // frame_count * frame_bytes bytes. HugePages::automatic tries 2 MiB pages and falls back to
  // base pages; ::on throws when none are reserved (vm.nr_hugepages). Throws std::system_error.
  UmemArea(std::uint32_t frame_count, std::uint32_t frame_bytes, HugePages hugepages);
  // Maps a memfd another ferryd created (a handover): `size_bytes` of it, on hugepages if it was.
  UmemArea(UniqueFd memfd, std::size_t size_bytes, bool hugepages);
  ~UmemArea();
  UmemArea(UmemArea&& other) noexcept;
  UmemArea& operator=(UmemArea&& other) noexcept;
  UmemArea(const UmemArea&) = delete;
  UmemArea& operator=(const UmemArea&) = delete;

  std::span<std::byte> bytes() const { return {base_, size_bytes_}; }
  std::byte* data() const { return base_; }
  std::size_t size_bytes() const { return size_bytes_; }
  bool on_hugepages() const { return hugepages_; }
  int memfd() const { return memfd_.get(); }

 private:
  void unmap();

  std::byte* base_ = nullptr;
  std::size_t size_bytes_ = 0;
  std::size_t mapped_bytes_ = 0;  // rounded up to the page size used
  bool hugepages_ = false;
  UniqueFd memfd_;
};

}  // namespace ferry::xsk
