// The one UMEM of the daemon: the mapping plus its single registration with the kernel.
#include "lib/xsk/umem_pool.hh"

#include <bit>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

#include "lib/common/log.hh"

namespace ferry::xsk {
namespace {

void require_power_of_two(std::uint32_t value, const char* what) {
  if (!std::has_single_bit(value)) {
    throw std::system_error(
        EINVAL, std::generic_category(),
        std::string(what) + " must be a power of two, got " + std::to_string(value));
  }
}

const UmemConfig& validated(const UmemConfig& config) {
  require_power_of_two(config.frame_bytes, "xdp.umem.frame_bytes");
  require_power_of_two(config.fill_entries, "xdp.rings.fill");
  require_power_of_two(config.completion_entries, "xdp.rings.completion");
  return config;
}

}  // namespace

UmemPool::UmemPool(const UmemConfig& config)
    : config_(validated(config)),
      area_(config_.frame_count, config_.frame_bytes, config_.hugepages),
      first_rings_(std::make_unique<FirstRings>()) {
  register_area();
}

UmemPool::~UmemPool() {
  unregister();
}

void UmemPool::register_area() {
  xsk_umem_config umem_config{};
  umem_config.fill_size = config_.fill_entries;
  umem_config.comp_size = config_.completion_entries;
  umem_config.frame_size = config_.frame_bytes;
  umem_config.frame_headroom = config_.headroom_bytes;
  umem_config.flags = 0;
  *first_rings_ = FirstRings{};
  int err = xsk_umem__create(&umem_, area_.data(), area_.size_bytes(), &first_rings_->fill,
                             &first_rings_->completion, &umem_config);
  if (err) {
    umem_ = nullptr;
    std::string hint = err == -EPERM || err == -ENOMEM
                           ? " (needs CAP_NET_RAW and CAP_IPC_LOCK, or a larger RLIMIT_MEMLOCK)"
                       : err == -EINVAL ? " (frame_bytes must be 2048..page size, headroom_bytes well below it)"
                                        : "";
    throw std::system_error(-err, std::generic_category(),
                            "registering a UMEM of " + std::to_string(config_.frame_count) + " x " +
                                std::to_string(config_.frame_bytes) + " bytes" + hint);
  }
}

bool UmemPool::unregister() {
  if (!umem_) return true;
  int err = xsk_umem__delete(umem_);
  if (err) {
    // A socket still holds the UMEM: leave registration and mapping alive rather than unmap
    // memory the kernel may still write into. Only a teardown-order bug gets here.
    log::error("UMEM still in use at teardown ({}); leaking it",
               std::generic_category().message(-err));
    static_cast<void>(new UmemArea(std::move(area_)));
    return false;
  }
  umem_ = nullptr;
  return true;
}

void UmemPool::reregister() {
  if (!unregister()) {
    throw std::system_error(EBUSY, std::generic_category(), "re-registering a UMEM still in use");
  }
  register_area();
}

UmemSlab UmemPool::make_slab(std::uint32_t index, std::uint32_t count, OwnershipCheck check) const {
  if (count == 0 || index >= count || config_.frame_count / count == 0) {
    throw std::invalid_argument("slab " + std::to_string(index) + " of " + std::to_string(count) +
                                " over " + std::to_string(config_.frame_count) + " frames");
  }
  std::uint32_t per_slab = config_.frame_count / count;
  return UmemSlab(area_.bytes(), config_.frame_bytes, index * per_slab, per_slab, check);
}

}  // namespace ferry::xsk
