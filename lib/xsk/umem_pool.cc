// The one UMEM of the daemon: the mapping plus its single registration with the kernel.
#include "lib/xsk/umem_pool.hh"

#include <sys/resource.h>

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

UmemPool::UmemPool(const UmemConfig& config, UniqueFd memfd, bool hugepages)
    : config_(validated(config)),
      area_(std::move(memfd), std::size_t{config.frame_count} * config.frame_bytes, hugepages) {}

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
    std::string what = "registering a UMEM of " + std::to_string(config_.frame_count) + " x " +
                       std::to_string(config_.frame_bytes) + " bytes";
    if (err == -ENOBUFS) {
      what = "out of locked memory for the UMEM: " + memlock_advice();
    } else if (err == -EPERM) {
      what += " (needs CAP_NET_RAW)";
    } else if (err == -EINVAL) {
      what += " (frame_bytes must be 2048..page size, headroom_bytes well below it)";
    }
    throw std::system_error(-err, std::generic_category(), what);
  }
}

std::string UmemPool::memlock_advice() const {
  // The kernel charges a UMEM to the user's locked memory unless the process has CAP_IPC_LOCK,
  // and refuses it (ENOBUFS) past RLIMIT_MEMLOCK: say how much is needed, what is allowed, and
  // the three ways out.
  auto mib = [](std::uint64_t bytes) {
    return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
  };
  rlimit limit{};
  std::string allowed = "an unknown amount";
  std::string fewer_frames;
  if (getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    auto text = [&](rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : mib(v); };
    allowed = text(limit.rlim_cur) + " (hard limit " + text(limit.rlim_max) + ")";
    if (limit.rlim_cur != RLIM_INFINITY) {
      // What fits the limit, less what else this user has locked (unknown here): an upper bound.
      fewer_frames =
          " to at most " + std::to_string(std::bit_floor(limit.rlim_cur / config_.frame_bytes));
    }
  }
  return std::to_string(config_.frame_count) + " x " + std::to_string(config_.frame_bytes) +
         " bytes need " + mib(area_.size_bytes()) + ", RLIMIT_MEMLOCK allows " + allowed +
         " and ferryd has no CAP_IPC_LOCK; raise the limit (LimitMEMLOCK= in the systemd unit, "
         "ulimit -l, the container's memlock limit), grant ferryd CAP_IPC_LOCK "
         "(AmbientCapabilities=), or lower xdp.umem.frames" +
         fewer_frames;
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
