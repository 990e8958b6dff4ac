// The fast path's side of a handover: the old plane stops its workers where every frame is in a
// kernel ring or on a free stack and passes its UMEM and sockets on; the new plane adopts them,
// rebuilds each slab's account from the free stack it is given and the rings, and carries on.
#include <fcntl.h>
#include <fmt/format.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "lib/common/log.hh"
#include "lib/fastpath/fastpath_plane.hh"

namespace ferry::fastpath {
namespace {

[[noreturn]] void differs(const std::string& what) {
  throw std::runtime_error("the running ferryd's fast path differs from this configuration's (" +
                           what +
                           "): a handover keeps every socket, so `ferryctl reload` the running "
                           "ferryd with this file first, or restart it");
}

}  // namespace

HandedOverFastpath FastpathPlane::hand_over() const {
  HandedOverFastpath out;
  out.umem = umem_->pool().config();
  out.hugepages = umem_->pool().on_hugepages();
  out.memfd = duplicate_fd(umem_->pool().memfd());
  for (const auto& ports : sockets_) {
    std::vector<xsk::HandedOverSocket> list;
    for (const xsk::XskSocket* socket : ports) {
      xsk::HandedOverSocket h;
      h.fd = duplicate_fd(socket->fd());
      h.ifname = socket->ifname();
      h.ifindex = socket->ifindex();
      h.queue = socket->queue();
      h.rx_entries = xdp_config_.rings.rx;
      h.tx_entries = xdp_config_.rings.tx;
      h.fill_entries = xdp_config_.rings.fill;
      h.completion_entries = xdp_config_.rings.completion;
      h.info = socket->bind_info();
      list.push_back(std::move(h));
    }
    out.sockets.push_back(std::move(list));
  }
  return out;
}

std::vector<WorkerCarry> FastpathPlane::stop_for_handover() {
  stop_workers();  // each worker gives its held frames back to its slab as it ends
  std::vector<WorkerCarry> out;
  for (const WorkerThread& t : workers_) {
    WorkerCarry c;
    c.queue = t.worker->queue();
    auto free = t.worker->slab().free_frames();
    c.free_frames.assign(free.begin(), free.end());
    c.flows = t.worker->flows().carry();
    xsk::FrameAccount a = t.worker->account();
    if (!a.balanced()) {
      log::warning("fast path: {} stopped with {} of {} frames accounted for", t.name,
                   a.accounted(), a.slab_frames);
    }
    out.push_back(std::move(c));
  }
  return out;
}

FastpathPlane::FastpathPlane(boost::asio::io_context& io, metrics::Registry& registry,
                             XskMapFds maps, const config::Config& config, FastpathHooks hooks,
                             HandedOverFastpath handed)
    : FastpathPlane(Unbound{}, io, registry, maps, config, std::move(hooks)) {
  adopt_sockets(std::move(handed));
}

void FastpathPlane::adopt_sockets(HandedOverFastpath handed) {
  const std::vector<std::vector<const PortSpec*>> ports_of = ports_by_worker(xdp_config_);
  const xsk::UmemConfig wanted = umem_config_of(xdp_config_);
  if (handed.umem.frame_count != wanted.frame_count ||
      handed.umem.frame_bytes != wanted.frame_bytes ||
      handed.umem.fill_entries != wanted.fill_entries ||
      handed.umem.completion_entries != wanted.completion_entries) {
    differs(
        fmt::format("UMEM {} x {} bytes, rings fill {} completion {}; this file: {} x {}, {}, {}",
                    handed.umem.frame_count, handed.umem.frame_bytes, handed.umem.fill_entries,
                    handed.umem.completion_entries, wanted.frame_count, wanted.frame_bytes,
                    wanted.fill_entries, wanted.completion_entries));
  }
  if (handed.sockets.size() != ports_of.size()) {
    differs(fmt::format("{} queues; this file: {}", handed.sockets.size(), ports_of.size()));
  }
  umem_ = std::make_unique<xsk::SharedUmem>(handed.umem, std::move(handed.memfd), handed.hugepages);
  sockets_.assign(ports_of.size(), {});
  pending_ports_.assign(ports_of.size(), {});
  for (std::size_t w = 0; w < ports_of.size(); ++w) {
    if (handed.sockets[w].size() != ports_of[w].size()) {
      differs(fmt::format("queue {} on {} interfaces; this file: {}", layout_.queues[w],
                          handed.sockets[w].size(), ports_of[w].size()));
    }
    for (std::size_t i = 0; i < ports_of[w].size(); ++i) {
      xsk::HandedOverSocket& h = handed.sockets[w][i];
      const PortSpec& p = *ports_of[w][i];
      if (h.ifname != p.ifname || h.ifindex != p.ifindex || h.queue != layout_.queues[w]) {
        differs(fmt::format("{} (ifindex {}) queue {}; this file: {} (ifindex {}) queue {}",
                            h.ifname, h.ifindex, h.queue, p.ifname, p.ifindex, layout_.queues[w]));
      }
      if (h.rx_entries != xdp_config_.rings.rx || h.tx_entries != xdp_config_.rings.tx) {
        differs(fmt::format("rx/tx rings {}/{}; this file: {}/{}", h.rx_entries, h.tx_entries,
                            xdp_config_.rings.rx, xdp_config_.rings.tx));
      }
      xsk::XskSocket& socket = umem_->adopt(std::move(h));
      sockets_[w].push_back(&socket);
      pending_ports_[w].push_back(
          worker_port(socket, p, static_cast<std::uint32_t>(ports_of[w].size())));
    }
    // Built now, not in the pause: a flow table is allocated and zeroed here. Its slab's free
    // stack is set when the old workers have stopped.
    auto worker = std::make_unique<Worker>(
        worker_options(static_cast<std::uint32_t>(w)),
        umem_->pool().make_slab(static_cast<std::uint32_t>(w),
                                static_cast<std::uint32_t>(ports_of.size())),
        pending_ports_[w], board_->reader(w));
    workers_.push_back(
        {std::move(worker), std::thread(), -1, "xdp-" + std::to_string(layout_.queues[w])});
  }
  pending_ports_.clear();
}

void FastpathPlane::start_handed_over(const std::vector<WorkerCarry>& carries) {
  if (carries.size() != workers_.size()) {
    throw std::runtime_error(fmt::format("the running ferryd stopped {} workers; this one has {}",
                                         carries.size(), workers_.size()));
  }
  // The old workers ran on after the rings were mapped here: start from where they stopped.
  for (auto& ports : sockets_) {
    for (xsk::XskSocket* socket : ports) socket->resync_rings();
  }
  std::size_t flows = 0;
  std::uint64_t in_rings = 0;
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    const WorkerCarry& c = carries[w];
    Worker& worker = *workers_[w].worker;
    if (c.queue != worker.queue()) {
      throw std::runtime_error(
          fmt::format("worker {} of the running ferryd served queue {}, this one's serves {}", w,
                      c.queue, worker.queue()));
    }
    worker.restore_free_frames(c.free_frames);
    if (!worker.take_flows(c.flows)) {
      log::warning(
          "fast path: queue {}: the flow table changed size ({} -> {} entries); its {} "
          "flows go by Maglev's choice again",
          c.queue, c.flows.capacity, xdp_config_.flows.entries, c.flows.entries.size());
    } else {
      flows += c.flows.entries.size();
    }
    xsk::FrameAccount a = worker.account();
    if (!a.balanced()) {
      throw std::runtime_error(fmt::format(
          "queue {}: the handed-over frames do not add up: {} accounted of {} (free {}, fill {}, "
          "rx {}, tx {}, completion {})",
          c.queue, a.accounted(), a.slab_frames, a.free_stack, a.fill, a.rx, a.tx, a.completion));
    }
    worker.publish_account();
    in_rings += a.fill + a.rx + a.tx + a.completion;
  }
  frames_in_rings_ = in_rings;
  // The same sockets at the same keys: a rewrite the data path does not notice, which records
  // the keys this plane removes at its own end.
  insert_into_xskmap();
  carried_flows_ = flows;
  start_workers();
}

void FastpathPlane::serve_handed_over() {
  resolve_backends(*watch_->tables());
  serve();
}

}  // namespace ferry::fastpath
