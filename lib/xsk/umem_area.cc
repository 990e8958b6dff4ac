// The UMEM's memory: one anonymous private mapping, populated up front, optionally on hugepages.
#include "lib/xsk/umem_area.hh"

#include <sys/mman.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "lib/common/log.hh"

namespace ferry::xsk {
namespace {

constexpr std::size_t kHugePageBytes = 2u << 20;

void* map(std::size_t bytes, bool huge) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | (huge ? MAP_HUGETLB : 0);
  return ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
}

}  // namespace

UmemArea::UmemArea(std::uint32_t frame_count, std::uint32_t frame_bytes, HugePages hugepages)
    : size_bytes_(std::size_t{frame_count} * frame_bytes) {
  if (size_bytes_ == 0) throw std::system_error(EINVAL, std::generic_category(), "empty UMEM");
  if (hugepages != HugePages::off) {
    std::size_t rounded = (size_bytes_ + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = map(rounded, true);
    if (p != MAP_FAILED) {
      base_ = static_cast<std::byte*>(p);
      mapped_bytes_ = rounded;
      hugepages_ = true;
      return;
    }
    int err = errno;
    if (hugepages == HugePages::on) {
      throw std::system_error(err, std::generic_category(),
                              "UMEM of " + std::to_string(size_bytes_) +
                                  " bytes on 2 MiB hugepages (reserve them with "
                                  "vm.nr_hugepages, or set hugepages to \"auto\")");
    }
    log::debug("UMEM: no hugepages ({}), using base pages", std::generic_category().message(err));
  }
  void* p = map(size_bytes_, false);
  if (p == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            "mapping a UMEM of " + std::to_string(size_bytes_) + " bytes");
  }
  base_ = static_cast<std::byte*>(p);
  mapped_bytes_ = size_bytes_;
}

UmemArea::~UmemArea() {
  unmap();
}

UmemArea::UmemArea(UmemArea&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      hugepages_(other.hugepages_) {}

UmemArea& UmemArea::operator=(UmemArea&& other) noexcept {
  if (this != &other) {
    unmap();
    base_ = std::exchange(other.base_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    hugepages_ = other.hugepages_;
  }
  return *this;
}

void UmemArea::unmap() {
  if (base_) ::munmap(base_, mapped_bytes_);
  base_ = nullptr;
}

}  // namespace ferry::xsk
