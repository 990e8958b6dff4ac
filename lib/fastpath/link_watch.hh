// Follows the kernel's links (RTNLGRP_LINK) for the interfaces the fast path serves: logs once
// when one is deleted, counts it, and calls back when an interface of that name is up again so
// the daemon re-binds the data plane. Lives on the control thread's io_context and outlives any
// one FastpathPlane (a re-bind replaces the plane), so its counters keep counting.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lib/fastpath/link_tracker.hh"
#include "lib/fastpath/rtnetlink.hh"
#include "lib/metrics/registry.hh"

namespace ferry::fastpath {

class LinkWatch {
 public:
  // Called on the io_context's thread when a followed interface is back; it must not destroy the
  // watch from inside the call (post the re-bind instead).
  using Returned = std::function<void(const LinkEvent&)>;
  // Called on the io_context's thread for every notification about a followed interface that
  // stays (its MTU, flags or addresses may have changed).
  using Changed = std::function<void()>;

  // Subscribes to link notifications and starts reading them. Throws std::system_error when
  // netlink is unusable.
  LinkWatch(boost::asio::io_context& io, metrics::Registry& registry, Returned returned,
            Changed changed = {});
  ~LinkWatch();
  LinkWatch(const LinkWatch&) = delete;
  LinkWatch& operator=(const LinkWatch&) = delete;

  // The interfaces the data plane is bound to now (name, ifindex), after a start, reload or
  // re-bind. Checks them against a dump at once, so a link that went between the bind and this
  // call is reported too.
  void follow(const std::vector<std::pair<std::string, int>>& bound);
  // Deletions (and renames away) seen per configured interface name since start.
  const std::map<std::string, std::uint64_t>& losses() const { return losses_; }

 private:
  void arm_read();
  void on_readable();
  void resync();
  void act(const LinkEvent& event);
  void collect(metrics::SnapshotBuilder& out) const;

  Returned returned_;
  Changed changed_;
  RtnetlinkSocket events_;                             // RTMGRP_LINK
  RtnetlinkSocket requests_;                           // RTM_GETLINK dumps
  boost::asio::posix::stream_descriptor events_wait_;  // a dup of events_' fd, for async_wait
  LinkTracker tracker_;
  std::map<std::string, std::uint64_t> losses_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // handlers outliving us see false
  metrics::Registry::Handle metrics_;  // first to go: the collector reads the members above
};

}  // namespace ferry::fastpath
