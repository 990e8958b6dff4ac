// The kernel's view of next hops, kept current on the control thread: routes out of the fast
// path's interfaces and their neighbours (dumped over rtnetlink, then followed through
// RTNLGRP_NEIGH / route notifications), turned into NextHopTables for the workers' snapshots.
// Bursts of changes are coalesced into one rebuild, but for a next hop's first MAC, which is
// published at once. Also sends the resolution requests (RTM_NEWNEIGH + NTF_USE) for next hops
// the workers missed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "lib/fastpath/neighbour_table.hh"
#include "lib/fastpath/port_layout.hh"
#include "lib/fastpath/rtnetlink.hh"
#include "lib/fastpath/snapshot.hh"

namespace ferry::fastpath {

struct NeighbourKeyLess {
  bool operator()(const NeighbourKey& a, const NeighbourKey& b) const {
    if (a.port != b.port) return a.port < b.port;
    if (a.version != b.version) return a.version < b.version;
    return a.address < b.address;
  }
};

struct NextHopWatchStats {
  std::uint64_t notifications = 0;      // netlink route/neighbour messages handled
  std::uint64_t resyncs = 0;            // full re-dumps after the kernel dropped notifications
  std::uint64_t rebuilds = 0;           // NextHopTables published
  std::uint64_t resolutions_sent = 0;   // NTF_USE requests sent
  std::uint64_t resolution_errors = 0;  // ... refused by the kernel
  std::uint64_t stale_refreshes = 0;    // NTF_USE sent to re-probe stale neighbours
};

class NextHopWatch {
 public:
  using Publish = std::function<void(std::shared_ptr<const NextHopTables>)>;

  // Subscribes, then dumps routes and neighbours (so no change falls between the two). Throws
  // std::system_error when netlink is unusable.
  NextHopWatch(boost::asio::io_context& io, const FastpathLayout& layout, Publish publish);
  ~NextHopWatch();
  NextHopWatch(const NextHopWatch&) = delete;
  NextHopWatch& operator=(const NextHopWatch&) = delete;

  // Starts following notifications; `publish` is called (on the io_context's thread) after each
  // coalesced burst of changes.
  void start();
  std::shared_ptr<const NextHopTables> tables() const { return tables_; }

  // Asks the kernel to resolve a next hop a worker missed; the same key at most once a second.
  void request_resolution(const NeighbourKey& key, std::chrono::steady_clock::time_point now);
  // Re-probes neighbours the kernel holds as STALE: the workers' traffic bypasses the kernel,
  // so nothing else would ever confirm them.
  void refresh_stale();
  const NextHopWatchStats& stats() const { return stats_; }

 private:
  struct NeighbourState {
    packet::MacAddress mac{};
    std::uint16_t state = 0;
  };
  void dump_routes();
  void dump_neighbours();
  void handle(const nlmsghdr* message);
  void on_readable();
  void arm_read();
  void schedule_rebuild();
  void rebuild();
  std::shared_ptr<const NextHopTables> build() const;
  void drain_request_errors();

  const FastpathLayout& layout_;
  Publish publish_;
  RtnetlinkSocket events_;    // subscribed to neighbour and route notifications
  RtnetlinkSocket requests_;  // dumps and NTF_USE requests
  boost::asio::posix::stream_descriptor events_wait_;  // a dup of events_' fd, for async_wait
  boost::asio::steady_timer rebuild_timer_;
  bool rebuild_pending_ = false;
  bool routes_dirty_ = false;
  // A next hop got its first usable MAC: workers may hold frames for it, so publish at once.
  bool first_mac_ = false;
  std::vector<KernelRoute> routes_;
  std::map<NeighbourKey, NeighbourState, NeighbourKeyLess> neighbours_;
  std::map<NeighbourKey, std::chrono::steady_clock::time_point, NeighbourKeyLess> requested_;
  std::shared_ptr<const NextHopTables> tables_;
  std::uint32_t sequence_ = 1;
  NextHopWatchStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // handlers outliving us see false
};

}  // namespace ferry::fastpath
