// The one UMEM and every AF_XDP socket bound to it, torn down in the only safe order: sockets
// (newest first), then the UMEM registration, then the mapping.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lib/xsk/umem_pool.hh"
#include "lib/xsk/xsk_socket.hh"

namespace ferry::xsk {

class SharedUmem {
 public:
  explicit SharedUmem(const UmemConfig& config) : pool_(config) {}
  // The UMEM of another ferryd (a handover); its sockets come in through adopt().
  SharedUmem(const UmemConfig& config, UniqueFd memfd, bool hugepages)
      : pool_(config, std::move(memfd), hugepages) {}
  ~SharedUmem();
  SharedUmem(const SharedUmem&) = delete;
  SharedUmem& operator=(const SharedUmem&) = delete;

  // Binds an AF_XDP socket to (options.ifname, options.queue). The first call uses the UMEM's
  // own fill/completion rings (xsk_socket__create); every further call is
  // xsk_socket__create_shared with its own. Throws std::system_error naming interface and queue.
  // Fill the socket's fill ring before putting it into an XSKMAP: frames redirected to a socket
  // with an empty fill ring are dropped (XDP_STATISTICS rx_dropped / rx_fill_ring_empty_descs).
  XskSocket& bind(const XskOptions& options);
  // Takes a socket bound by another ferryd to this UMEM (XskSocket::adopt).
  XskSocket& adopt(HandedOverSocket handed);

  UmemPool& pool() { return pool_; }
  const UmemPool& pool() const { return pool_; }
  std::span<const std::unique_ptr<XskSocket>> sockets() const { return sockets_; }

 private:
  UmemPool pool_;
  std::vector<std::unique_ptr<XskSocket>> sockets_;
};

}  // namespace ferry::xsk
