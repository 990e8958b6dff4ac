// The one UMEM and every AF_XDP socket bound to it, torn down in the only safe order.
#include "lib/xsk/shared_umem.hh"

namespace ferry::xsk {

SharedUmem::~SharedUmem() {
  while (!sockets_.empty()) sockets_.pop_back();
  // pool_'s destructor then unregisters the UMEM and unmaps it.
}

XskSocket& SharedUmem::bind(const XskOptions& options) {
  sockets_.reserve(sockets_.size() + 1);  // so a throwing push_back cannot orphan a socket
  if (sockets_.empty()) {
    sockets_.push_back(XskSocket::bind_first(pool_, options));
  } else {
    sockets_.push_back(XskSocket::bind_shared(pool_, options, sockets_.front()->bind_info()));
  }
  return *sockets_.back();
}

XskSocket& SharedUmem::adopt(HandedOverSocket handed) {
  sockets_.reserve(sockets_.size() + 1);
  sockets_.push_back(XskSocket::adopt(std::move(handed)));
  return *sockets_.back();
}

}  // namespace ferry::xsk
