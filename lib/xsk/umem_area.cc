// The UMEM's memory: one shared mapping of a memfd, populated up front, optionally on hugepages.
#include "lib/xsk/umem_area.hh"

#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "lib/common/log.hh"

namespace ferry::xsk {
namespace {

constexpr std::size_t kHugePageBytes = 2u << 20;

void* map(int fd, std::size_t bytes) {
  return ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
}

// A memfd of `bytes`, mapped; MAP_FAILED (errno set) when it cannot be had.
void* create(std::size_t bytes, bool huge, UniqueFd& fd) {
  fd.reset(::memfd_create("ferry-umem", MFD_CLOEXEC | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0)));
  if (!fd) return MAP_FAILED;
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return MAP_FAILED;
  // Hugetlb pages are reserved at mmap(): none free fails here, not with a SIGBUS later.
  return map(fd.get(), bytes);
}

}  // namespace

UmemArea::UmemArea(std::uint32_t frame_count, std::uint32_t frame_bytes, HugePages hugepages)
    : size_bytes_(std::size_t{frame_count} * frame_bytes) {
  if (size_bytes_ == 0) throw std::system_error(EINVAL, std::generic_category(), "empty UMEM");
  if (hugepages != HugePages::off) {
    std::size_t rounded = (size_bytes_ + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = create(rounded, true, memfd_);
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
  void* p = create(size_bytes_, false, memfd_);
  if (p == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            "mapping a UMEM of " + std::to_string(size_bytes_) + " bytes");
  }
  base_ = static_cast<std::byte*>(p);
  mapped_bytes_ = size_bytes_;
}

UmemArea::UmemArea(UniqueFd memfd, std::size_t size_bytes, bool hugepages)
    : size_bytes_(size_bytes), hugepages_(hugepages), memfd_(std::move(memfd)) {
  mapped_bytes_ =
      hugepages ? (size_bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes : size_bytes;
  void* p = map(memfd_.get(), mapped_bytes_);
  if (p == MAP_FAILED) {
    throw std::system_error(
        errno, std::generic_category(),
        "mapping the handed-over UMEM of " + std::to_string(size_bytes) + " bytes");
  }
  base_ = static_cast<std::byte*>(p);
}

UmemArea::~UmemArea() {
  unmap();
}

UmemArea::UmemArea(UmemArea&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      hugepages_(other.hugepages_),
      memfd_(std::move(other.memfd_)) {}

UmemArea& UmemArea::operator=(UmemArea&& other) noexcept {
  if (this != &other) {
    unmap();
    base_ = std::exchange(other.base_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    hugepages_ = other.hugepages_;
    memfd_ = std::move(other.memfd_);
  }
  return *this;
}

void UmemArea::unmap() {
  if (base_) ::munmap(base_, mapped_bytes_);
  base_ = nullptr;
}

}  // namespace ferry::xsk
