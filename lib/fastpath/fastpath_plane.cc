// The AF_XDP fast path: UMEM, sockets, workers, tables and their lifecycle.
#include "lib/fastpath/fastpath_plane.hh"

#include <bpf/bpf.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "bpf/ferry_shared.h"
#include "lib/common/env.hh"
#include "lib/common/log.hh"
#include "lib/common/thread_guard.hh"
#include "lib/packet/route_table.hh"
#include "lib/packet/service_table.hh"

namespace ferry::fastpath {
namespace {

constexpr auto kHousekeepingPeriod = std::chrono::milliseconds(50);
// Copy mode transmits at most 32 frames per sendto() unless the socket says otherwise; kernels
// >= 6.17 take XDP_MAX_TX_SKB_BUDGET (not in this system's headers yet). Older ones refuse it.
constexpr int kSolXdp = 283;
constexpr int kXdpMaxTxSkbBudget = 9;

void raise_tx_budget(const xsk::XskSocket& socket, std::uint32_t tx_entries) {
  int budget = static_cast<int>(std::min<std::uint32_t>(tx_entries, 256));
  if (::setsockopt(socket.fd(), kSolXdp, kXdpMaxTxSkbBudget, &budget, sizeof(budget)) != 0) {
    log::debug("{} queue {}: XDP_MAX_TX_SKB_BUDGET not taken ({}); 32 frames per sendto()",
               socket.ifname(), socket.queue(), std::strerror(errno));
  }
}
constexpr auto kStaleRefreshPeriod = std::chrono::seconds(30);

// `previous`: the tables these replace (null at start), whose unchanged Maglev tables are kept;
// `slots`: where the backends' counter slots come from (null: not counted per backend);
// `check_only`: the tables are only checked (no Maglev table filled).
std::shared_ptr<const ConfigTables> build_config_tables(
    const config::Config& config, const FastpathLayout& layout, const FastpathHooks& hooks,
    BackendSlots* slots, const ConfigTables* previous = nullptr, bool check_only = false) {
  packet::ServiceTableOptions options;
  if (previous != nullptr) options.previous = &previous->services;
  options.check_only = check_only;
  BackendSlotLease lease = slots ? slots->lease() : BackendSlotLease();
  if (slots) take_counter_slots(options, lease);
  if (hooks.backend_up) {
    options.backend_up = [&hooks](const config::ServiceConfig& s, const net::Endpoint& b) {
      return hooks.backend_up(s.name, b);
    };
  }
  if (hooks.flows_reset_ms) {
    options.flows_reset_ms = [&hooks](const config::ServiceConfig& s) {
      return hooks.flows_reset_ms(s.vip);
    };
  }
  if (hooks.steering_id) {
    options.steering_id = [&hooks](const config::ServiceConfig& s) {
      return hooks.steering_id(s.name);
    };
  }
  packet::ServiceTable services = packet::build_service_table(config.services, options);
  packet::RouteTable routes = packet::RouteTable::build(
      config.routes, [&layout](std::string_view name) { return layout.slot_of(name); });
  if (lease.uncounted() > 0) {
    log::warning(
        "services: {} backends past the fast path's {} per-backend counter slots are not counted "
        "per backend (ferry_xsk_backend_*_total); they take traffic as the others do",
        lease.uncounted(), slots->capacity());
  }
  return std::make_shared<const ConfigTables>(
      ConfigTables{std::move(services), std::move(routes), config.xdp.encap, std::move(lease)});
}

UniqueFd dup_map_fd(int fd, const char* what) {
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    throw std::system_error(errno, std::generic_category(), std::string("XDP map ") + what);
  }
  return UniqueFd(copy);
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

xsk::ZeroCopy to_zerocopy(config::Tristate t) {
  return t == config::Tristate::on    ? xsk::ZeroCopy::on
         : t == config::Tristate::off ? xsk::ZeroCopy::off
                                      : xsk::ZeroCopy::automatic;
}

// One UMEM is either zero-copy or copy for every socket on it: the first bind decides.
xsk::ZeroCopy umem_zerocopy(const FastpathLayout& layout) {
  bool any_on = false, any_off = false;
  for (const PortSpec& p : layout.ports) {
    any_on = any_on || p.zerocopy == config::Tristate::on;
    any_off = any_off || p.zerocopy == config::Tristate::off;
  }
  if (any_on && any_off) {
    throw std::runtime_error(
        "xdp.interfaces: zerocopy \"on\" and \"off\" cannot be mixed: every socket shares one "
        "UMEM, which is either zero-copy or copy");
  }
  return any_on ? xsk::ZeroCopy::on : any_off ? xsk::ZeroCopy::off : xsk::ZeroCopy::automatic;
}

}  // namespace

void FastpathPlane::check_tables(const config::Config& config) {
  // Only the slots matter to the tables, and slots follow the config's interface order.
  FastpathLayout names;
  for (const auto& iface : config.xdp.interfaces) {
    PortSpec port;
    port.slot = static_cast<std::uint32_t>(names.ports.size());
    port.ifname = iface.name;
    names.ports.push_back(std::move(port));
  }
  build_config_tables(config, names, {}, nullptr, nullptr, true);
}

FastpathPlane::FastpathPlane(boost::asio::io_context& io, metrics::Registry& registry,
                             XskMapFds maps, const config::Config& config, FastpathHooks hooks)
    : FastpathPlane(Unbound{}, io, registry, maps, config, std::move(hooks)) {
  try {
    bind_sockets(config.xdp);
    start_workers();
    insert_into_xskmap();
    resolve_backends(*watch_->tables());
  } catch (...) {
    stop_workers();
    remove_from_xskmap();
    throw;
  }
  serve();
}

FastpathPlane::FastpathPlane(Unbound, boost::asio::io_context& io, metrics::Registry& registry,
                             XskMapFds maps, const config::Config& config, FastpathHooks hooks)
    : io_(io),
      registry_(registry),
      xdp_config_(config.xdp),
      config_(config),
      layout_(resolve_layout(config.xdp, system_interface_facts())),
      hooks_(std::move(hooks)),
      ifslots_fd_(dup_map_fd(maps.ifslots, "ifslots")),
      xsks_fd_(dup_map_fd(maps.xsks, "xsks")),
      config_tables_(build_config_tables(config, layout_, hooks_, &backend_slots_)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      resolve_wait_(io),
      housekeeping_timer_(io) {
  if (!wake_fd_) throw std::system_error(errno, std::generic_category(), "eventfd");
  int resolve_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (resolve_fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  resolve_wait_.assign(resolve_fd);
  watch_ = std::make_unique<NextHopWatch>(io_, layout_,
                                          [this](std::shared_ptr<const NextHopTables> next_hops) {
                                            publish(config_tables_, std::move(next_hops));
                                          });
  auto first = std::make_unique<Snapshot>();
  first->config = config_tables_;
  first->next_hops = watch_->tables();
  first->ports = std::make_shared<const PortFacts>(read_port_facts(layout_));
  for (const PortSpec& p : layout_.ports) first->port_macs[p.slot] = p.mac;
  first->port_count = static_cast<std::uint32_t>(layout_.ports.size());
  board_ = std::make_unique<SnapshotBoard>(std::move(first), layout_.queues.size());
}

void FastpathPlane::serve() {
  watch_->start();
  arm_resolve_wait();
  next_stale_refresh_ = std::chrono::steady_clock::now() + kStaleRefreshPeriod;
  arm_housekeeping();
  metrics_ = registry_.add([this](metrics::SnapshotBuilder& out) { collect(out); });
  log::info(
      "fast path: {} workers over {} interfaces, UMEM {} x {} bytes ({}), {} kernel routes, "
      "{} neighbours",
      workers_.size(), layout_.ports.size(), xdp_config_.umem.frames, xdp_config_.umem.frame_bytes,
      umem_->pool().on_hugepages() ? "hugepages" : "base pages",
      watch_->tables()->routes.routes().size(), watch_->tables()->neighbours.size());
}

FastpathPlane::~FastpathPlane() {
  metrics_.reset();
  *alive_ = false;
  housekeeping_timer_.cancel();
  stop_workers();
  boost::system::error_code ignored;
  resolve_wait_.cancel(ignored);
  resolve_wait_.close(ignored);  // after the workers, which write it
  // Handed over: the successor's workers serve these very XSKMAP entries.
  if (!handed_over_) remove_from_xskmap();
  workers_.clear();
  sockets_.clear();
  umem_.reset();  // sockets (newest first), then the UMEM registration, then the mapping
  watch_.reset();
  board_.reset();
  if (handed_over_) {
    log::info("fast path: handed over; this process's copies of the sockets and UMEM closed");
  } else {
    log::info("fast path: workers stopped, sockets closed, UMEM released");
  }
}

std::vector<std::vector<const PortSpec*>> FastpathPlane::ports_by_worker(
    const config::XdpConfig& xdp) const {
  const std::uint32_t workers = static_cast<std::uint32_t>(layout_.queues.size());
  const std::uint32_t slab_frames = xdp.umem.frames / workers;
  std::vector<std::vector<const PortSpec*>> ports_of(workers);
  for (std::uint32_t w = 0; w < workers; ++w) {
    for (const PortSpec& p : layout_.ports) {
      if (p.has_queue(layout_.queues[w])) ports_of[w].push_back(&p);
    }
    // Half the slab may sit on the fill sides; the rest is for frames in flight.
    std::uint32_t per_socket = slab_frames / (2 * static_cast<std::uint32_t>(ports_of[w].size()));
    if (per_socket < Worker::kMaxBurst) {
      throw std::runtime_error(
          "xdp.umem.frames: " + std::to_string(xdp.umem.frames) + " frames over " +
          std::to_string(workers) + " queues leave " + std::to_string(slab_frames) +
          " per worker, too few for " + std::to_string(ports_of[w].size()) +
          " sockets; raise it to at least " +
          std::to_string(workers * 2 * ports_of[w].size() * Worker::kMaxBurst));
    }
  }
  return ports_of;
}

xsk::UmemConfig FastpathPlane::umem_config_of(const config::XdpConfig& xdp) {
  xsk::UmemConfig umem_config;
  umem_config.frame_count = xdp.umem.frames;
  umem_config.frame_bytes = xdp.umem.frame_bytes;
  umem_config.fill_entries = xdp.rings.fill;
  umem_config.completion_entries = xdp.rings.completion;
  return umem_config;
}

WorkerPort FastpathPlane::worker_port(const xsk::XskSocket& socket, const PortSpec& spec,
                                      std::uint32_t sockets_of_worker) const {
  const std::uint32_t slab_frames =
      xdp_config_.umem.frames / static_cast<std::uint32_t>(layout_.queues.size());
  WorkerPort port;
  port.slot = spec.slot;
  port.rings = socket.rings();
  port.fd = socket.fd();
  port.need_wakeup = socket.bind_info().need_wakeup;
  port.fill_target = std::min(xdp_config_.rings.fill, slab_frames / (2 * sockets_of_worker));
  return port;
}

WorkerOptions FastpathPlane::worker_options(std::uint32_t w) {
  WorkerOptions options;
  options.queue = layout_.queues[w];
  options.resolve_wake_fd = resolve_wait_.native_handle();
  options.flows = xdp_config_.flows;
  options.match_hints = !env_flag("FERRY_XSK_IGNORE_XDP_MATCH");
  return options;
}

void FastpathPlane::bind_sockets(const config::XdpConfig& xdp) {
  const std::uint32_t workers = static_cast<std::uint32_t>(layout_.queues.size());
  xsk::ZeroCopy first_mode = umem_zerocopy(layout_);
  // Check the sizes before mapping anything.
  std::vector<std::vector<const PortSpec*>> ports_of = ports_by_worker(xdp);
  umem_ = std::make_unique<xsk::SharedUmem>(umem_config_of(xdp));
  sockets_.assign(workers, {});
  for (std::uint32_t w = 0; w < workers; ++w) {
    std::vector<WorkerPort> ports;
    for (const PortSpec* p : ports_of[w]) {
      xsk::XskOptions options;
      options.ifname = p->ifname;
      options.queue = layout_.queues[w];
      options.rx_entries = xdp.rings.rx;
      options.tx_entries = xdp.rings.tx;
      options.zerocopy = umem_->sockets().empty() ? first_mode : to_zerocopy(p->zerocopy);
      options.need_wakeup = true;
      xsk::XskSocket& socket = umem_->bind(options);
      sockets_[w].push_back(&socket);
      raise_tx_budget(socket, xdp.rings.tx);
      ports.push_back(worker_port(socket, *p, static_cast<std::uint32_t>(ports_of[w].size())));
    }
    WorkerOptions options = worker_options(w);
    auto worker = std::make_unique<Worker>(options, umem_->pool().make_slab(w, workers),
                                           std::move(ports), board_->reader(w));
    // Fill rings first: a socket goes into the XSKMAP only with buffers to receive into.
    worker->prime();
    workers_.push_back(
        {std::move(worker), std::thread(), -1, "xdp-" + std::to_string(options.queue)});
  }
}

void FastpathPlane::start_workers() {
  std::vector<int> cpus = allowed_cpus();
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    WorkerThread& t = workers_[w];
    t.cpu = cpus.empty() ? -1 : cpus[w % cpus.size()];
    t.thread = std::thread([this, &t] {
      pthread_setname_np(pthread_self(), ("ferry-" + t.name).substr(0, 15).c_str());
      if (t.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t.cpu, &set);
        if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
          log::warning("fast path: pinning {} to CPU {}: {}", t.name, t.cpu, std::strerror(err));
        }
      }
      auto failure = run_guarded("fast path worker " + t.name, [this, &t] {
        std::function<void()> beat = [] {};
        if (hooks_.enroll_heartbeat) beat = hooks_.enroll_heartbeat(t.name);
        t.worker->run(stop_, wake_fd_.get(), beat);
      });
      // Its queue is served by nobody now: the board stops waiting for it, and ferryd stops in
      // order so that systemd starts it afresh.
      if (failure) {
        t.worker->park();
        request_fatal_stop("fast path worker " + t.name, "its queue is no longer served");
      }
    });
  }
}

void FastpathPlane::insert_into_xskmap() {
  wrote_maps_ = true;
  for (const PortSpec& p : layout_.ports) {
    std::uint32_t ifindex = static_cast<std::uint32_t>(p.ifindex);
    if (bpf_map_update_elem(ifslots_fd_.get(), &ifindex, &p.slot, BPF_ANY) != 0) {
      throw std::system_error(errno, std::generic_category(), p.ifname + ": writing its XDP slot");
    }
  }
  for (std::size_t w = 0; w < sockets_.size(); ++w) {
    for (const xsk::XskSocket* socket : sockets_[w]) {
      std::uint32_t slot = *layout_.slot_of(socket->ifname());
      std::uint32_t key = bpf::ferry_xsk_key(slot, socket->queue());
      int fd = socket->fd();
      if (bpf_map_update_elem(xsks_fd_.get(), &key, &fd, BPF_ANY) != 0) {
        throw std::system_error(errno, std::generic_category(),
                                socket->ifname() + " queue " + std::to_string(socket->queue()) +
                                    ": inserting the AF_XDP socket into the XSKMAP");
      }
      map_keys_.push_back(key);
    }
  }
}

void FastpathPlane::remove_from_xskmap() noexcept {
  if (!wrote_maps_) return;  // never inserted: the entries, if any, are someone else's
  wrote_maps_ = false;
  for (std::uint32_t key : map_keys_) bpf_map_delete_elem(xsks_fd_.get(), &key);
  map_keys_.clear();
  for (const PortSpec& p : layout_.ports) {
    std::uint32_t ifindex = static_cast<std::uint32_t>(p.ifindex);
    bpf_map_delete_elem(ifslots_fd_.get(), &ifindex);
  }
}

void FastpathPlane::stop_workers() noexcept {
  stop_.store(true, std::memory_order_release);
  std::uint64_t one = 1;
  if (::write(wake_fd_.get(), &one, sizeof(one)) < 0) {
    // The workers also wake within their poll() timeout.
  }
  for (WorkerThread& t : workers_) {
    if (t.thread.joinable()) t.thread.join();
  }
}

bool FastpathPlane::serves_layout_of(const config::XdpConfig& xdp) const {
  if (!same_socket_layout(xdp_config_, xdp)) return false;
  // An interface deleted (and maybe re-created) since the sockets were bound: bind them again.
  InterfaceFacts facts = system_interface_facts();
  for (const PortSpec& port : layout_.ports) {
    if (facts.ifindex(port.ifname) != port.ifindex) return false;
  }
  return true;
}

void FastpathPlane::apply(const config::Config& config) {
  auto tables = build_tables(config);
  config_ = config;
  config_tables_ = tables;
  publish(std::move(tables), watch_->tables());
}

void FastpathPlane::refresh_backends() {
  // The running config built once already, so only the hook's answers differ.
  auto tables = build_tables(config_);
  config_tables_ = tables;
  publish(std::move(tables), watch_->tables());
}

std::shared_ptr<const ConfigTables> FastpathPlane::build_tables(const config::Config& config) {
  auto tables = build_config_tables(config, layout_, hooks_, &backend_slots_, config_tables_.get());
  // A slot free again counted for another backend, and no worker counts into it now: what it
  // holds is where the new backend's counters start.
  for (std::uint32_t slot : tables->backend_slots.reused()) {
    if (backend_base_.size() <= slot) backend_base_.resize(slot + 1);
    backend_base_[slot] = backend_totals(slot, {});
  }
  return tables;
}

BackendTotals FastpathPlane::backend_totals(std::uint32_t slot, const BackendTotals& base) const {
  BackendTotals sum;
  for (const WorkerThread& t : workers_) {
    const BackendTraffic& c = t.worker->backend_counters()[slot];
    sum.in_packets += c.in_packets.value();
    sum.in_bytes += c.in_bytes.value();
    sum.out_packets += c.out_packets.value();
    sum.out_bytes += c.out_bytes.value();
  }
  return {sum.in_packets - base.in_packets, sum.in_bytes - base.in_bytes,
          sum.out_packets - base.out_packets, sum.out_bytes - base.out_bytes};
}

void FastpathPlane::publish(std::shared_ptr<const ConfigTables> config,
                            std::shared_ptr<const NextHopTables> next_hops) {
  auto next = std::make_unique<Snapshot>(board_->current());
  next->config = std::move(config);
  next->next_hops = next_hops;
  // Addresses come and go with routes, which is what publishes: read them (and MTUs) again.
  PortFacts ports = read_port_facts(layout_);
  if (!next->ports || !(*next->ports == ports))
    next->ports = std::make_shared<const PortFacts>(ports);
  board_->publish(std::move(next));
  if (next_hops) resolve_backends(*next_hops);
}

void FastpathPlane::refresh_ports() {
  PortFacts ports = read_port_facts(layout_);
  const Snapshot& now = board_->current();
  if (now.ports && *now.ports == ports) return;
  auto next = std::make_unique<Snapshot>(now);
  next->ports = std::make_shared<const PortFacts>(ports);
  board_->publish(std::move(next));
}

void FastpathPlane::resolve_backends(const NextHopTables& next_hops) {
  // A worker that misses a next hop holds the frame for a while (HoldQueue), but a resolved
  // backend costs its first datagrams nothing: resolve the backends before traffic needs them, at
  // start, on reload, and again while one stays unresolved (at most once a second each).
  if (!watch_) return;
  auto now = std::chrono::steady_clock::now();
  for (const config::ServiceConfig& service : config_.services) {
    bool balanced_here = service.protocols.udp || service.forwarding != config::Forwarding::nat;
    if (!balanced_here || service.mode != config::ServiceMode::proxy) continue;
    for (const net::Endpoint& backend : service.backends) {
      auto version = backend.address.is_v4() ? packet::IpVersion::v4 : packet::IpVersion::v6;
      const KernelRoute* route = next_hops.routes.lookup(backend.address.bytes, version);
      if (!route) continue;
      const auto& hop = route->gateway ? route->gateway->bytes : backend.address.bytes;
      if (next_hops.neighbours.find(route->port, version, hop)) continue;
      watch_->request_resolution(NeighbourKey{route->port, version, hop}, now);
    }
  }
}

void FastpathPlane::arm_housekeeping() {
  housekeeping_timer_.expires_after(kHousekeepingPeriod);
  housekeeping_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    housekeeping();
    arm_housekeeping();
  });
}

void FastpathPlane::arm_resolve_wait() {
  resolve_wait_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           [this, alive = alive_](const boost::system::error_code& ec) {
                             if (ec || !*alive) return;
                             std::uint64_t wakes = 0;
                             if (::read(resolve_wait_.native_handle(), &wakes, sizeof(wakes)) < 0) {
                               // Readable, so this does not fail; the queues are drained anyway.
                             }
                             drain_resolutions();
                             arm_resolve_wait();
                           });
}

void FastpathPlane::drain_resolutions() {
  auto now = std::chrono::steady_clock::now();
  unreleased_.resize(workers_.size());
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    while (auto report = workers_[w].worker->resolution_queue().pop()) {
      if (report->timed_out_frames == 0) {
        watch_->request_resolution(report->key, now);
      } else {
        Unreleased why = watch_->hold_timed_out(report->key);
        unreleased_[w][static_cast<std::size_t>(why)] += report->timed_out_frames;
      }
    }
  }
}

void FastpathPlane::housekeeping() {
  auto now = std::chrono::steady_clock::now();
  drain_resolutions();
  board_->reclaim();
  // Backends a reload left without a counter slot get one once the tables it replaced are freed.
  if (config_tables_->backend_slots.uncounted() > 0 && backend_slots_.free() > 0) {
    refresh_backends();
  }
  if (now >= next_stale_refresh_) {
    watch_->refresh_stale();
    next_stale_refresh_ = now + kStaleRefreshPeriod;
  }
}

}  // namespace ferry::fastpath
