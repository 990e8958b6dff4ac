// The AF_XDP fast path of the daemon: one shared UMEM, one worker thread per configured queue
// index (each owning its slab and its socket on every fast-path interface), the tables they
// read (published RCU-style), and the kernel next-hop state that feeds them. Created when
// xdp.interfaces is not empty, after the XDP program is loaded; every method runs on the control
// thread, whose io_context also carries the plane's netlink watch and housekeeping timer.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lib/common/unique_fd.hh"
#include "lib/config/config.hh"
#include "lib/fastpath/fastpath_handover.hh"
#include "lib/fastpath/next_hop_watch.hh"
#include "lib/fastpath/port_layout.hh"
#include "lib/fastpath/snapshot_board.hh"
#include "lib/fastpath/worker.hh"
#include "lib/metrics/registry.hh"
#include "lib/xsk/shared_umem.hh"

namespace ferry::fastpath {

// The XDP program's maps the fast path writes (fds owned by the program; the plane dups them).
struct XskMapFds {
  int ifslots = -1;  // ifindex -> slot
  int xsks = -1;     // ferry_xsk_key(slot, queue) -> AF_XDP socket
};

struct FastpathHooks {
  // Called on each worker thread as it starts, with the worker's name ("xdp-0"): returns what
  // the worker calls to show it is alive (at least every 250 ms, idle or not).
  std::function<std::function<void()>(const std::string& name)> enroll_heartbeat;
  // Whether `backend` of UDP service `service` may take new flows (health checks); null: all may.
  // Read on the control thread whenever the tables are built.
  std::function<bool(const std::string& service, const net::Endpoint& backend)> backend_up;
  // The FlowTable::clock_ms() at which the flows to `vip` were last reset (it was announced
  // again after a withdrawal), if ever; null: never.
  std::function<std::optional<std::uint32_t>(const net::IpAddress& vip)> flows_reset_ms;
  // The XDP maps' id of UDP service `service`, which the XDP program passes with its frames
  // (ferry_frame_meta); null: the workers match every frame themselves.
  std::function<std::optional<std::uint32_t>(const std::string& service)> steering_id;
};

class FastpathPlane {
 public:
  // Resolves the interfaces, builds the tables, reads routes and neighbours, maps and registers
  // the UMEM, binds every (interface, queue) socket, fills the fill rings, starts the workers and
  // only then puts the sockets into the XSKMAP. Throws std::runtime_error / std::system_error
  // (with what to change) after undoing what it did.
  FastpathPlane(boost::asio::io_context& io, metrics::Registry& registry, XskMapFds maps,
                const config::Config& config, FastpathHooks hooks);
  // Reverse order: workers stopped and joined, XSKMAP entries and slots removed, sockets closed,
  // UMEM unregistered and unmapped.
  ~FastpathPlane();
  FastpathPlane(const FastpathPlane&) = delete;
  FastpathPlane& operator=(const FastpathPlane&) = delete;

  // A handover, new side (fastpath_handover.cc): adopts the running ferryd's UMEM and sockets,
  // which must be exactly what `config` would bind, and builds the tables and the next-hop watch;
  // no worker runs until start_handed_over(). Throws std::runtime_error saying what differs.
  FastpathPlane(boost::asio::io_context& io, metrics::Registry& registry, XskMapFds maps,
                const config::Config& config, FastpathHooks hooks, HandedOverFastpath handed);
  // New side: one worker per carry (the old workers' free stacks and flows, by queue), each
  // checked to account for every frame of its slab, then started. Throws (no worker started)
  // when a carry does not fit.
  void start_handed_over(const std::vector<WorkerCarry>& carries);
  // New side, after start_handed_over(): the watch, the housekeeping and the metrics start.
  void serve_handed_over();
  // Old side: the UMEM and the sockets, with fds duplicated for the wire.
  HandedOverFastpath hand_over() const;
  // Old side: stops and joins the workers, each leaving every frame of its slab in a kernel ring
  // or on its free stack, and returns that state. The frames in the rings wait there.
  std::vector<WorkerCarry> stop_for_handover();
  // Old side, once the successor serves: the destructor leaves the XSKMAP as it is.
  void handed_over() { handed_over_ = true; }
  std::size_t carried_flows() const { return carried_flows_; }
  std::uint64_t frames_in_rings() const { return frames_in_rings_; }

  // True when `xdp` binds the same sockets as this plane, so apply() can take it.
  bool serves_layout_of(const config::XdpConfig& xdp) const;
  // Rebuilds the services and routes tables for `config` and publishes them; workers pick them
  // up at their next loop turn, frames in flight are untouched. Throws std::invalid_argument
  // (nothing changed) when the tables cannot be built.
  void apply(const config::Config& config);
  // Builds the tables for `config` without publishing them: the check a reload runs before it
  // changes anything. Throws std::invalid_argument like apply().
  static void check_tables(const config::Config& config);
  // Rebuilds the services table from the running config with hooks.backend_up as it reads now and
  // publishes it: a backend that went down leaves its service's Maglev table (only its flows
  // move), one that came back returns to its old slots.
  void refresh_backends();
  // Reads the ports' MTUs and addresses again and publishes them if they changed: a link's MTU
  // changed (the link watch calls it on every change to a followed link).
  void refresh_ports();

  // Adds the sockets' bind info to XdpPlane::status()["interfaces"][] and a "fastpath" object.
  void annotate_status(nlohmann::json& xdp_status) const;
  // Per-worker details for `ferryctl workers`, by heartbeat name.
  nlohmann::json worker_details() const;
  std::size_t worker_count() const { return workers_.size(); }
  const FastpathLayout& layout() const { return layout_; }
  // Published table generations so far (1 = the initial tables).
  std::uint64_t table_generation() const { return board_->generation(); }

 private:
  struct WorkerThread {
    std::unique_ptr<Worker> worker;
    std::thread thread;
    int cpu = -1;  // pinned CPU, -1 when unpinned
    std::string name;
  };
  // What every constructor does first: tables, watch and board, no socket.
  struct Unbound {};
  FastpathPlane(Unbound, boost::asio::io_context& io, metrics::Registry& registry, XskMapFds maps,
                const config::Config& config, FastpathHooks hooks);
  // Starts the watch, the timers and the metrics: the plane serves.
  void serve();
  std::vector<std::vector<const PortSpec*>> ports_by_worker(const config::XdpConfig& xdp) const;
  static xsk::UmemConfig umem_config_of(const config::XdpConfig& xdp);
  WorkerPort worker_port(const xsk::XskSocket& socket, const PortSpec& spec,
                         std::uint32_t sockets_of_worker) const;
  WorkerOptions worker_options(std::uint32_t w);
  void bind_sockets(const config::XdpConfig& xdp);
  void adopt_sockets(HandedOverFastpath handed);
  void start_workers();
  void insert_into_xskmap();
  void remove_from_xskmap() noexcept;
  void stop_workers() noexcept;
  void publish(std::shared_ptr<const ConfigTables> config,
               std::shared_ptr<const NextHopTables> next_hops);
  // Asks the kernel to resolve every balanced backend's next hop that `next_hops` lacks.
  void resolve_backends(const NextHopTables& next_hops);
  void housekeeping();
  void arm_housekeeping();
  // The workers' resolution queues: misses resolved, holds that ran out classified (into
  // unreleased_); at a worker's wake (its first miss of a next hop) and on every housekeeping turn.
  void drain_resolutions();
  void arm_resolve_wait();
  void collect(metrics::SnapshotBuilder& out) const;
  // The tables for `config` (apply, refresh_backends), the start of reused counter slots noted.
  std::shared_ptr<const ConfigTables> build_tables(const config::Config& config);
  // What the workers counted into per-backend counter slot `slot`, less `base`.
  BackendTotals backend_totals(std::uint32_t slot, const BackendTotals& base) const;
  void collect_backends(metrics::SnapshotBuilder& out) const;

  boost::asio::io_context& io_;
  metrics::Registry& registry_;
  config::XdpConfig xdp_config_;
  config::Config config_;  // the running config, for refresh_backends()
  FastpathLayout layout_;
  FastpathHooks hooks_;
  UniqueFd ifslots_fd_;
  UniqueFd xsks_fd_;
  BackendSlots backend_slots_;  // before the tables, which hold leases of it
  // By counter slot: the workers' totals when the slot was last reused (BackendSlotLease::reused).
  std::vector<BackendTotals> backend_base_;
  std::shared_ptr<const ConfigTables> config_tables_;
  std::unique_ptr<NextHopWatch> watch_;
  std::unique_ptr<SnapshotBoard> board_;
  std::unique_ptr<xsk::SharedUmem> umem_;
  std::vector<std::vector<xsk::XskSocket*>> sockets_;     // [worker][port index]
  std::vector<std::vector<std::uint32_t>> socket_slots_;  // slots, same shape
  std::vector<WorkerThread> workers_;
  std::atomic<bool> stop_{false};
  UniqueFd wake_fd_;  // eventfd that wakes sleeping workers to stop
  // eventfd the workers write when they queue a next hop to resolve (WorkerOptions).
  boost::asio::posix::stream_descriptor resolve_wait_;
  std::vector<std::uint32_t> map_keys_;  // XSKMAP keys written, for removal
  // Frames of holds that ran out, by worker and the reason the control thread found (the rest of
  // ferry_xsk_neighbour_unreleased_total is the workers' own counters).
  std::vector<std::array<std::uint64_t, kUnreleasedCount>> unreleased_;
  // Handed-over sockets' ports, by worker, while adopt_sockets() builds the workers.
  std::vector<std::vector<WorkerPort>> pending_ports_;
  bool handed_over_ = false;
  bool wrote_maps_ = false;            // insert_into_xskmap() ran: remove_from_xskmap() undoes it
  std::size_t carried_flows_ = 0;      // flows a handover brought in
  std::uint64_t frames_in_rings_ = 0;  // frames a handover found in the kernel rings
  boost::asio::steady_timer housekeeping_timer_;
  std::chrono::steady_clock::time_point next_stale_refresh_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  metrics::Registry::Handle metrics_;  // first to go: the collector reads the members above
};

}  // namespace ferry::fastpath
