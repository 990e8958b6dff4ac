// One AF_XDP worker: owns one queue index on every fast-path interface (its ports), one slab of
// the shared UMEM, its counters and the frames it holds for unresolved next hops. Each loop turn:
// recycle completions, send held frames whose next hop resolved, rx burst per port, process each
// frame, tx burst on the egress port's socket of the same queue, refill.
#pragma once

#include <linux/if_xdp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "bpf/ferry_shared.h"
#include "lib/config/config.hh"
#include "lib/fastpath/backend_counters.hh"
#include "lib/fastpath/flow_table.hh"
#include "lib/fastpath/fragment_table.hh"
#include "lib/fastpath/frame_processor.hh"
#include "lib/fastpath/hold_queue.hh"
#include "lib/fastpath/resolution_queue.hh"
#include "lib/fastpath/snapshot_board.hh"
#include "lib/fastpath/worker_counters.hh"
#include "lib/packet/fragment.hh"
#include "lib/xsk/frame_account.hh"
#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/umem_slab.hh"

namespace ferry::fastpath {

// One (interface, queue) socket of a worker.
struct WorkerPort {
  std::uint32_t slot = 0;  // the interface's fast-path slot
  xsk::QueueRings rings;
  int fd = -1;                    // the AF_XDP socket; -1 for user-space rings (tests): no syscalls
  bool need_wakeup = true;        // bound with XDP_USE_NEED_WAKEUP
  std::uint32_t fill_target = 0;  // frames kept on the kernel's fill side of this socket
};

struct WorkerOptions {
  std::uint32_t queue = 0;
  std::uint32_t burst = 64;             // rx frames per port per turn, <= kMaxBurst
  std::uint32_t idle_spin_turns = 512;  // empty turns before sleeping in poll()
  int sleep_timeout_ms = 100;           // poll() timeout: the heartbeat needs a beat per 250 ms
  // An eventfd the worker writes when it queues a next hop for resolution (at most once per rx
  // burst, only for a next hop not already waiting), so the control thread asks the kernel at the
  // first miss instead of at its next housekeeping turn. -1: none (tests).
  int resolve_wake_fd = -1;
  // The flow affinity table (xdp.flows): entries 0 = off, every request is Maglev's.
  config::FlowTableConfig flows{};
  // Take the XDP program's match of each frame from the metadata before it (ferry_frame_meta);
  // false (FERRY_XSK_IGNORE_XDP_MATCH=1) matches every frame in the worker, as a program that
  // passes nothing makes it do.
  bool match_hints = true;
};

class Worker {
 public:
  static constexpr std::uint32_t kMaxBurst = 64;
  // Flow table slots the expiry sweep looks at per busy turn (one bucket: at most 8 entry reads
  // per burst), and before each sleep (an idle table is swept round within a few sleeps).
  static constexpr std::uint32_t kFlowSweepSlotsPerTurn = FlowTable::kWays;
  static constexpr std::uint32_t kFlowSweepSlotsIdle = 8192;

  Worker(const WorkerOptions& options, xsk::UmemSlab slab, std::vector<WorkerPort> ports,
         SnapshotBoard::Reader reader);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Fills every port's fill ring up to its target. Call before the sockets go into the XSKMAP:
  // a frame redirected to a socket with an empty fill ring is dropped by the kernel.
  void prime();
  // One loop turn. True when it moved any frame.
  bool poll_once();
  // The thread body: turns until `stop`, sleeping in poll() on the ports and `wake_fd` when
  // idle; calls `beat` at least every 100 ms, busy or idle. Parks its snapshot reader on exit.
  void run(const std::atomic<bool>& stop, int wake_fd, const std::function<void()>& beat);

  // For a worker thread that ends without run() returning normally: never hold snapshot
  // reclamation back.
  void park() noexcept { reader_.park(); }

  // Where the slab's frames are, computed now: call from the worker's thread, or when stopped.
  xsk::FrameAccount account() const;
  // The account as last published by the worker (any thread).
  xsk::FrameAccount published_account() const { return published_.read(); }
  void publish_account() { published_.publish(account()); }

  const WorkerCounters& counters() const { return counters_; }
  const BackendCounters& backend_counters() const { return backend_counters_; }
  ResolutionQueue& resolution_queue() { return resolutions_; }
  std::uint32_t queue() const { return options_.queue; }
  std::span<const WorkerPort> ports() const { return ports_; }
  const HoldQueue& held() const { return held_; }
  const FlowTable& flows() const { return flows_; }
  const FragmentTable& fragments() const { return fragments_; }
  // A handover, before the worker runs: its slab's free stack as the previous ferryd's worker
  // left it (UmemSlab::restore_free), and that worker's flows.
  void restore_free_frames(std::span<const std::uint64_t> free) { slab_.restore_free(free); }
  bool take_flows(const FlowTable::Carried& carried) { return flows_.take(carried); }
  const xsk::UmemSlab& slab() const { return slab_; }
  std::uint64_t snapshot_generation() const {
    return seen_generation_.load(std::memory_order_relaxed);
  }
  // Frames submitted for transmission and not yet completed, over all ports.
  std::uint32_t tx_in_flight() const;

 private:
  // `flows` gets the turn's clock with the first burst that has frames.
  std::uint32_t receive(std::uint32_t port_index, const Snapshot& snapshot, FlowAffinity& flows);
  void transmit(std::uint32_t port_index);
  // Every frame to transmit goes here: a full staging array (kMaxBurst) is transmitted first.
  void stage(std::int8_t port_index, std::uint64_t addr, std::uint32_t len);
  bool serve_held(const Snapshot& snapshot);
  // The IP hop's rarer outcomes (ip_hop.hh): a changed length, fragments to cut, a later fragment
  // to hold for its first, the held ones a first fragment releases. `drops` as in receive().
  IpHop ip_hop(std::uint64_t addr, std::uint32_t len, std::uint64_t now_ms);
  void dispose(std::uint64_t addr, std::uint32_t len, const FrameOutcome& o,
               const Snapshot& snapshot, std::uint64_t now_ms,
               std::array<std::uint32_t, kDropCount>& drops);
  void send_or_hold(std::int8_t egress, std::uint64_t addr, std::uint32_t len,
                    const FrameOutcome& o, std::array<std::uint32_t, kDropCount>& drops);
  // Cuts the IPv4 packet in frame `addr` into pieces of at most `mtu` IP bytes: piece 0 stays in
  // `addr`, the others go to frames of the slab, `offset` bytes into each. Returns how many
  // (`pieces`, `lengths`); 0 when it could not (the frame freed, counted in `drops` as too_big).
  std::uint32_t cut(std::uint64_t addr, std::uint32_t len, std::uint32_t mtu, std::uint32_t offset,
                    std::span<std::uint64_t, packet::kMaxFragmentPieces> pieces,
                    std::span<std::uint32_t, packet::kMaxFragmentPieces> lengths,
                    std::array<std::uint32_t, kDropCount>& drops);
  void cut_and_send(std::int8_t egress, std::uint64_t addr, std::uint32_t len,
                    const FrameOutcome& o, std::array<std::uint32_t, kDropCount>& drops);
  void cut_and_encapsulate(std::uint64_t addr, std::uint32_t len, const Snapshot& snapshot,
                           std::uint64_t now_ms, std::array<std::uint32_t, kDropCount>& drops);
  void release_fragments(std::uint32_t datagram, const Snapshot& snapshot, std::uint64_t now_ms,
                         std::array<std::uint32_t, kDropCount>& drops);
  void free_orphans();
  bool sweep_fragments(std::uint64_t now_ms);
  bool recycle(std::uint32_t port_index);
  void kick(std::uint32_t port_index);
  void free_frames(std::span<const std::uint64_t> addrs);

  WorkerOptions options_;
  xsk::UmemSlab slab_;
  TunnelCut tunnel_cut_{};  // IpHop::tunnel_cut: the packet to cut for its tunnel, if any
  std::vector<WorkerPort> ports_;
  std::vector<xsk::QueueRings> rings_;  // ports_[i].rings, contiguous for account_frames
  SnapshotBoard::Reader reader_;
  std::atomic<std::uint64_t> seen_generation_{0};
  std::array<std::int8_t, FERRY_MAX_INTERFACES> port_of_slot_;  // -1: no socket on this queue
  std::array<std::array<xdp_desc, kMaxBurst>, FERRY_MAX_INTERFACES> staged_{};  // tx, per port
  std::array<std::uint32_t, FERRY_MAX_INTERFACES> staged_count_{};
  ResolutionQueue resolutions_;
  HoldQueue held_;
  std::uint64_t held_checked_generation_ = 0;  // the snapshot the held frames were last tried on
  WorkerCounters counters_;
  BackendCounters backend_counters_;
  FlowTable flows_;  // after counters_, which it writes from its constructor on
  FragmentTable fragments_;
  packet::IcmpRateLimit icmp_limit_;
  std::uint16_t next_ip_id_ = 0;
  std::array<std::uint64_t, FragmentTable::Limits{}.held_frames> orphans_{};
  std::uint32_t orphan_count_ = 0;
  std::uint64_t next_fragment_sweep_ms_ = 0;
  PublishedAccount published_;
};

}  // namespace ferry::fastpath
