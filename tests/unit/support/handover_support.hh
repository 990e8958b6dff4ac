// Helpers the handover unit tests share (lib/handover, the fast path's part, lib/lifecycle):
// memfds standing in for the sockets an offer carries, and an offer as the peer receives it.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <stdexcept>
#include <string>

#include "lib/handover/offer.hh"

namespace ferry::test {

// A memfd with its own inode: what a listener, an AF_XDP socket or a map is to an offer.
inline UniqueFd stand_in(const std::string& name) {
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC));
  if (!fd) throw std::runtime_error("memfd_create");
  return fd;
}

inline ino_t inode_of(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return st.st_ino;
}

// What the peer receives for `wire`: the head as text, its own copies of the fds.
inline handover::Message received(const handover::Offer::Wire& wire) {
  handover::Message m{nlohmann::json::parse(wire.head.dump()), wire.body, {}};
  for (int fd : wire.fds) m.fds.push_back(duplicate_fd(fd));
  return m;
}

// `offer` as the peer reads it, a message of `stage`.
inline handover::Offer over_the_wire(const handover::Offer& offer, std::string_view stage) {
  return handover::Offer::decode(received(offer.encode()), stage);
}

}  // namespace ferry::test
