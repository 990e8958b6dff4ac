// One AF_XDP socket bound to (interface, queue) on the shared UMEM, with its four rings.
// Created by SharedUmem::bind; deleting it unmaps its rings and closes its fd.
#pragma once

#include <xdp/xsk.h>

#include <cstdint>
#include <memory>
#include <string>

#include "lib/common/unique_fd.hh"
#include "lib/xsk/queue_rings.hh"

namespace ferry::xsk {

class UmemPool;

enum class ZeroCopy { automatic, on, off };

struct XskOptions {
  std::string ifname;
  std::uint32_t queue = 0;
  std::uint32_t rx_entries = 2048;  // power of two
  std::uint32_t tx_entries = 2048;  // power of two
  // Only the first socket on the UMEM chooses; later ones inherit copy/zero-copy from it.
  ZeroCopy zerocopy = ZeroCopy::automatic;
  bool need_wakeup = true;
};

// What bind() was asked for and what the kernel granted.
struct BindInfo {
  std::uint16_t flags = 0;   // sxdp_flags passed to bind(): XDP_COPY/XDP_ZEROCOPY/... or
                             // XDP_SHARED_UMEM
  bool shared_umem = false;  // bound to the first socket's UMEM with its own fill/completion
  bool zerocopy = false;     // XDP_OPTIONS_ZEROCOPY from getsockopt(SOL_XDP, XDP_OPTIONS)
  bool need_wakeup = false;  // the rings carry XDP_RING_NEED_WAKEUP (inherited when shared)
};

// A socket another ferryd bound and handed over (lib/handover): its fd, where it is bound, its
// ring sizes (the kernel does not report them) and how it was bound.
struct HandedOverSocket {
  UniqueFd fd;
  std::string ifname;
  int ifindex = 0;
  std::uint32_t queue = 0;
  std::uint32_t rx_entries = 0;
  std::uint32_t tx_entries = 0;
  std::uint32_t fill_entries = 0;
  std::uint32_t completion_entries = 0;
  BindInfo info;
};

class XskSocket {
 public:
  // Maps the rings of a handed-over socket as they stand: the index words are the kernel's, so
  // the frames in every ring stay where they are. Throws std::system_error.
  static std::unique_ptr<XskSocket> adopt(HandedOverSocket handed);
  // Takes up the rings' shared index words into this process's cached views: the predecessor's
  // worker moved them after adopt() mapped the rings. Call once it has stopped, before the first
  // peek or reserve here.
  void resync_rings();
  ~XskSocket();
  XskSocket(const XskSocket&) = delete;
  XskSocket& operator=(const XskSocket&) = delete;

  int fd() const { return xsk_ ? xsk_socket__fd(xsk_) : adopted_fd_.get(); }
  const std::string& ifname() const { return ifname_; }
  int ifindex() const { return ifindex_; }
  std::uint32_t queue() const { return queue_; }
  const BindInfo& bind_info() const { return info_; }

  FillRing fill() const { return FillRing(fill_); }
  CompletionRing completion() const { return CompletionRing(completion_); }
  RxRing rx() const { return RxRing(&rings_->rx); }
  TxRing tx() const { return TxRing(&rings_->tx); }
  QueueRings rings() const { return {fill(), completion(), rx(), tx()}; }

  // The kernel's per-socket counters (getsockopt XDP_STATISTICS): rx drops, invalid
  // descriptors, ring-full and fill-ring-empty events. Zeroes if the kernel refuses.
  xdp_statistics statistics() const;

 private:
  friend class SharedUmem;
  // The ring structs libxdp fills in and keeps pointers to: they must not move while the
  // socket lives, hence their own allocation.
  struct Rings {
    xsk_ring_cons rx{};
    xsk_ring_prod tx{};
    xsk_ring_prod fill{};        // unused by the first socket (its rings live in UmemPool)
    xsk_ring_cons completion{};  // idem
  };

  // First socket: takes the UMEM's own fill/completion rings. Shared: creates its own.
  static std::unique_ptr<XskSocket> bind_first(UmemPool& pool, const XskOptions& options);
  static std::unique_ptr<XskSocket> bind_shared(UmemPool& pool, const XskOptions& options,
                                                const BindInfo& first);
  XskSocket(const XskOptions& options, int ifindex);
  int try_bind(UmemPool& pool, const XskOptions& options, std::uint16_t bind_flags, bool first);
  void read_options();

  std::string ifname_;
  int ifindex_ = 0;
  std::uint32_t queue_ = 0;
  BindInfo info_;
  std::unique_ptr<Rings> rings_;
  xsk_ring_prod* fill_ = nullptr;
  xsk_ring_cons* completion_ = nullptr;
  xsk_socket* xsk_ = nullptr;
  // A handed-over socket: no libxdp object, the fd and the four ring mappings are ours.
  struct Mapping {
    void* addr = nullptr;
    std::size_t bytes = 0;
  };
  UniqueFd adopted_fd_;
  Mapping mappings_[4];
};

}  // namespace ferry::xsk
