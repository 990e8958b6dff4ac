// One AF_XDP socket bound to (interface, queue) on the shared UMEM.
#include "lib/xsk/xsk_socket.hh"

#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "lib/common/log.hh"
#include "lib/xsk/umem_pool.hh"

namespace ferry::xsk {
namespace {

std::string where(const XskOptions& options) {
  return options.ifname + " queue " + std::to_string(options.queue);
}

std::string bind_hint(int err, const XskOptions& options) {
  switch (err) {
    case EINVAL:
      return " (does " + options.ifname + " have that many queues? see `ethtool -l " +
             options.ifname + "`)";
    case EBUSY:
      return " (another AF_XDP socket or program owns that queue)";
    case ENODEV:
    case ENXIO:
      return " (is the interface up?)";
    case EPERM:
      return " (needs CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF)";
    case EOPNOTSUPP:
      return " (the driver has no zero-copy support; set zerocopy to \"auto\" or \"off\")";
    default:
      return "";
  }
}

constexpr int kBusyRetries = 50;
constexpr std::chrono::milliseconds kBusyRetryInterval{10};

[[noreturn]] void fail(int err, const XskOptions& options, const std::string& what) {
  throw std::system_error(err, std::generic_category(),
                          where(options) + ": " + what + bind_hint(err, options));
}

}  // namespace

XskSocket::XskSocket(const XskOptions& options, int ifindex)
    : ifname_(options.ifname),
      ifindex_(ifindex),
      queue_(options.queue),
      rings_(std::make_unique<Rings>()) {}

XskSocket::~XskSocket() {
  // Unmaps rx/tx and (for shared sockets) this queue's fill/completion; closes the fd, which
  // also removes the socket from every XSKMAP unless another process holds it too.
  if (xsk_) xsk_socket__delete(xsk_);
  for (Mapping& m : mappings_) {
    if (m.addr) ::munmap(m.addr, m.bytes);
  }
}

namespace {

// One ring of a bound socket, mapped; its index words and entries at the kernel's offsets.
void* map_ring(int fd, const xdp_ring_offset& off, std::uint32_t entries, std::size_t entry_bytes,
               off_t pgoff, std::size_t& bytes) {
  bytes = off.desc + entries * entry_bytes;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff);
  return p == MAP_FAILED ? nullptr : p;
}

template <typename Ring>
void point_ring(Ring& ring, void* map, const xdp_ring_offset& off, std::uint32_t entries,
                bool producer_side) {
  auto* base = static_cast<char*>(map);
  ring.mask = entries - 1;
  ring.size = entries;
  ring.producer = reinterpret_cast<std::uint32_t*>(base + off.producer);
  ring.consumer = reinterpret_cast<std::uint32_t*>(base + off.consumer);
  ring.flags = reinterpret_cast<std::uint32_t*>(base + off.flags);
  ring.ring = base + off.desc;
  ring.cached_prod = __atomic_load_n(ring.producer, __ATOMIC_ACQUIRE);
  ring.cached_cons = __atomic_load_n(ring.consumer, __ATOMIC_ACQUIRE);
  // A producer's cached consumer is one lap ahead: libxdp's view of free slots.
  if (producer_side) ring.cached_cons += entries;
}

}  // namespace

void XskSocket::resync_rings() {
  auto take = [](auto& ring, bool producer_side) {
    ring.cached_prod = __atomic_load_n(ring.producer, __ATOMIC_ACQUIRE);
    ring.cached_cons = __atomic_load_n(ring.consumer, __ATOMIC_ACQUIRE);
    if (producer_side) ring.cached_cons += ring.size;
  };
  take(rings_->rx, false);
  take(rings_->tx, true);
  take(*fill_, true);
  take(*completion_, false);
}

std::unique_ptr<XskSocket> XskSocket::adopt(HandedOverSocket handed) {
  XskOptions options;
  options.ifname = handed.ifname;
  options.queue = handed.queue;
  for (std::uint32_t n :
       {handed.rx_entries, handed.tx_entries, handed.fill_entries, handed.completion_entries}) {
    if (!std::has_single_bit(n))
      fail(EINVAL, options, "handed-over ring sizes are not powers of two");
  }
  std::unique_ptr<XskSocket> socket(new XskSocket(options, handed.ifindex));
  socket->adopted_fd_ = std::move(handed.fd);
  socket->info_ = handed.info;
  const int fd = socket->adopted_fd_.get();
  xdp_mmap_offsets off{};
  socklen_t len = sizeof(off);
  if (getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len) != 0) {
    fail(errno, options, "reading the handed-over socket's ring offsets");
  }
  Rings& r = *socket->rings_;
  struct Wanted {
    const xdp_ring_offset& off;
    std::uint32_t entries;
    std::size_t entry_bytes;
    off_t pgoff;
  } wanted[4] = {
      {off.rx, handed.rx_entries, sizeof(xdp_desc), XDP_PGOFF_RX_RING},
      {off.tx, handed.tx_entries, sizeof(xdp_desc), XDP_PGOFF_TX_RING},
      {off.fr, handed.fill_entries, sizeof(std::uint64_t), XDP_UMEM_PGOFF_FILL_RING},
      {off.cr, handed.completion_entries, sizeof(std::uint64_t), XDP_UMEM_PGOFF_COMPLETION_RING}};
  for (int i = 0; i < 4; ++i) {
    Mapping& m = socket->mappings_[i];
    m.addr = map_ring(fd, wanted[i].off, wanted[i].entries, wanted[i].entry_bytes, wanted[i].pgoff,
                      m.bytes);
    if (!m.addr) fail(errno, options, "mapping a handed-over socket's rings");
  }
  point_ring(r.rx, socket->mappings_[0].addr, off.rx, handed.rx_entries, false);
  point_ring(r.tx, socket->mappings_[1].addr, off.tx, handed.tx_entries, true);
  point_ring(r.fill, socket->mappings_[2].addr, off.fr, handed.fill_entries, true);
  point_ring(r.completion, socket->mappings_[3].addr, off.cr, handed.completion_entries, false);
  socket->fill_ = &r.fill;
  socket->completion_ = &r.completion;
  return socket;
}

int XskSocket::try_bind(UmemPool& pool, const XskOptions& options, std::uint16_t bind_flags,
                        bool first) {
  xsk_socket_config config{};
  config.rx_size = options.rx_entries;
  config.tx_size = options.tx_entries;
  config.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // ferry attaches its own program
  config.xdp_flags = 0;
  config.bind_flags = bind_flags;
  *rings_ = Rings{};
  if (first) {
    fill_ = pool.first_fill();
    completion_ = pool.first_completion();
    return xsk_socket__create(&xsk_, options.ifname.c_str(), options.queue, pool.handle(),
                              &rings_->rx, &rings_->tx, &config);
  }
  fill_ = &rings_->fill;
  completion_ = &rings_->completion;
  return xsk_socket__create_shared(&xsk_, options.ifname.c_str(), options.queue, pool.handle(),
                                   &rings_->rx, &rings_->tx, fill_, completion_, &config);
}

void XskSocket::read_options() {
  xdp_options opts{};
  socklen_t len = sizeof(opts);
  if (getsockopt(fd(), SOL_XDP, XDP_OPTIONS, &opts, &len) == 0) {
    info_.zerocopy = (opts.flags & XDP_OPTIONS_ZEROCOPY) != 0;
  }
}

xdp_statistics XskSocket::statistics() const {
  xdp_statistics stats{};
  socklen_t len = sizeof(stats);
  if (getsockopt(fd(), SOL_XDP, XDP_STATISTICS, &stats, &len) != 0) stats = xdp_statistics{};
  return stats;
}

std::unique_ptr<XskSocket> XskSocket::bind_first(UmemPool& pool, const XskOptions& options) {
  if (!std::has_single_bit(options.rx_entries) || !std::has_single_bit(options.tx_entries)) {
    fail(EINVAL, options, "rx and tx ring sizes must be powers of two");
  }
  unsigned ifindex = if_nametoindex(options.ifname.c_str());
  if (ifindex == 0) fail(errno, options, "no such interface");
  std::unique_ptr<XskSocket> socket(new XskSocket(options, static_cast<int>(ifindex)));
  // Neither XDP_COPY nor XDP_ZEROCOPY lets the kernel try zero-copy and fall back to copy mode.
  std::uint16_t flags = options.zerocopy == ZeroCopy::on    ? XDP_ZEROCOPY
                        : options.zerocopy == ZeroCopy::off ? XDP_COPY
                                                            : 0;
  std::uint16_t wakeup = options.need_wakeup ? XDP_USE_NEED_WAKEUP : 0;
  int err = socket->try_bind(pool, options, flags | wakeup, true);
  // A reload that re-binds closed the queue's previous socket just before; the kernel releases
  // that socket's UMEM from a workqueue, so the queue reads busy for a few milliseconds.
  for (int attempt = 0; err == -EBUSY && attempt < kBusyRetries; ++attempt) {
    try {
      pool.reregister();
    } catch (const std::system_error&) {
      break;
    }
    std::this_thread::sleep_for(kBusyRetryInterval);
    err = socket->try_bind(pool, options, flags | wakeup, true);
  }
  if (err) {
    try {
      pool.reregister();  // so that a later first bind (after a config fix) starts clean
    } catch (const std::system_error& e) {
      log::warning("{}: UMEM re-registration after a failed bind: {}", where(options), e.what());
    }
    fail(-err, options, "binding the first AF_XDP socket");
  }
  socket->info_.flags = flags | wakeup;
  socket->info_.need_wakeup = options.need_wakeup;
  socket->read_options();
  return socket;
}

std::unique_ptr<XskSocket> XskSocket::bind_shared(UmemPool& pool, const XskOptions& options,
                                                  const BindInfo& first) {
  if (!std::has_single_bit(options.rx_entries) || !std::has_single_bit(options.tx_entries)) {
    fail(EINVAL, options, "rx and tx ring sizes must be powers of two");
  }
  unsigned ifindex = if_nametoindex(options.ifname.c_str());
  if (ifindex == 0) fail(errno, options, "no such interface");
  std::unique_ptr<XskSocket> socket(new XskSocket(options, static_cast<int>(ifindex)));
  // libxdp binds every further socket with XDP_SHARED_UMEM only; the kernel takes copy or
  // zero-copy and need_wakeup from the UMEM's first socket.
  int err = socket->try_bind(pool, options, 0, false);
  if (err) fail(-err, options, "binding an AF_XDP socket to the shared UMEM");
  socket->info_.flags = XDP_SHARED_UMEM;
  socket->info_.shared_umem = true;
  socket->info_.need_wakeup = first.need_wakeup;
  socket->read_options();
  if (options.zerocopy == ZeroCopy::on && !socket->info_.zerocopy) {
    fail(EOPNOTSUPP, options, "zero-copy requested but the UMEM's first socket runs in copy mode");
  }
  return socket;
}

}  // namespace ferry::xsk
