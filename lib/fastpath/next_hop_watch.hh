// The kernel's view of next hops, kept current on the control thread: routes out of the fast
// path's interfaces and their neighbours (dumped over rtnetlink, then followed through
// RTNLGRP_NEIGH / route notifications), turned into NextHopTables for the workers' snapshots.
// Bursts of changes are coalesced into one rebuild, but for a next hop's first MAC, which is
// published at once. Also resolves the next hops the workers missed: asks the kernel for the
// entry (RTM_GETNEIGH), takes a MAC it has, else has it solicit (RTM_NEWNEIGH + NTF_USE).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "lib/fastpath/neighbour_table.hh"
#include "lib/fastpath/next_hop_resolution.hh"
#include "lib/fastpath/port_layout.hh"
#include "lib/fastpath/rtnetlink.hh"
#include "lib/fastpath/snapshot.hh"

namespace ferry::fastpath {

struct NextHopWatchStats {
  std::uint64_t notifications = 0;      // netlink route/neighbour messages handled
  std::uint64_t resyncs = 0;            // full re-dumps after the kernel dropped notifications
  std::uint64_t rebuilds = 0;           // NextHopTables published
  std::uint64_t resolutions_sent = 0;   // NTF_USE requests sent for a next hop without an entry
  std::uint64_t resolution_errors = 0;  // requests and queries the kernel refused, or that failed
  std::uint64_t stale_refreshes = 0;    // NTF_USE sent to have the kernel confirm a STALE entry
  std::uint64_t queries = 0;            // RTM_GETNEIGH of one entry (a worker's miss, a timeout)
  std::uint64_t adopted = 0;   // entries with a MAC found by a query that ferry had not taken
  std::uint64_t restarts = 0;  // INCOMPLETE entries started over so that they solicit at once
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

  // A worker has frames for a next hop and no MAC: asks the kernel what it has for it and takes a
  // MAC it has, or makes it solicit the next hop (ResolutionTracker decides how, and how often).
  void request_resolution(const NeighbourKey& key, std::chrono::steady_clock::time_point now);
  // A worker's hold of frames for `key` ran out: why, from the kernel's entry now (a MAC it has is
  // taken at once); the next miss of `key` solicits it afresh.
  Unreleased hold_timed_out(const NeighbourKey& key);
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
  struct KernelAnswer {
    bool ok = false;                        // the kernel answered (an entry, or ENOENT)
    std::optional<NeighbourMessage> entry;  // nullopt: no entry
  };
  // The kernel's entry for `key` now. Throws std::system_error when netlink fails.
  KernelAnswer query(const NeighbourKey& key);
  // One request, acknowledged; false (counted) when the kernel refused it.
  bool send(std::vector<std::uint8_t> request);
  // Takes a usable entry a query found into the model and publishes at once.
  void adopt(const NeighbourKey& key, const NeighbourMessage& entry);
  static net::IpAddress address_of(const NeighbourKey& key);

  const FastpathLayout& layout_;
  Publish publish_;
  RtnetlinkSocket events_;    // subscribed to neighbour and route notifications
  RtnetlinkSocket requests_;  // dumps, queries and NTF_USE requests, each awaited
  boost::asio::posix::stream_descriptor events_wait_;  // a dup of events_' fd, for async_wait
  boost::asio::steady_timer rebuild_timer_;
  bool rebuild_pending_ = false;
  bool routes_dirty_ = false;
  // A next hop got its first usable MAC: workers may hold frames for it, so publish at once.
  bool first_mac_ = false;
  std::vector<KernelRoute> routes_;
  std::map<NeighbourKey, NeighbourState, NeighbourKeyLess> neighbours_;
  ResolutionTracker tracker_;
  std::shared_ptr<const NextHopTables> tables_;
  NextHopWatchStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // handlers outliving us see false
};

}  // namespace ferry::fastpath
