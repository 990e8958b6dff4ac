// What the fast path tells the operator: metrics families, `ferryctl status` and `workers`.
#include <fmt/format.h>

#include "lib/fastpath/fastpath_plane.hh"

namespace ferry::fastpath {
namespace {

using metrics::Type;

struct FamilyHelp {
  const char* name;
  const char* help;
  Type type;
};

constexpr FamilyHelp kFamilies[] = {
    {"ferry_xsk_rx_packets_total", "Frames received by AF_XDP workers, per socket.", Type::counter},
    {"ferry_xsk_rx_bytes_total", "Bytes of frames received by AF_XDP workers.", Type::counter},
    {"ferry_xsk_tx_packets_total", "Frames AF_XDP workers queued for transmission, per socket.",
     Type::counter},
    {"ferry_xsk_tx_bytes_total", "Bytes of frames queued for transmission.", Type::counter},
    {"ferry_xsk_drops_total", "Frames AF_XDP workers dropped, by reason.", Type::counter},
    {"ferry_xsk_frames", "Where each slab's frames are (frame conservation: the sum is the slab).",
     Type::gauge},
    {"ferry_xsk_slab_frames", "Frames in each worker's slab of the shared UMEM.", Type::gauge},
    {"ferry_xsk_fill_ring_empty_total",
     "Frames the kernel could not receive because the socket's fill ring was empty.",
     Type::counter},
    {"ferry_xsk_kernel_drops_total",
     "Per-socket drops and invalid descriptors counted by the kernel.", Type::counter},
    {"ferry_xsk_tx_kicks_total", "sendto() calls made to have the kernel transmit.", Type::counter},
    {"ferry_xsk_tx_kick_errors_total", "Transmission kicks the kernel refused.", Type::counter},
    {"ferry_xsk_fill_wakeups_total", "poll() calls made because a fill ring asked for a wakeup.",
     Type::counter},
    {"ferry_xsk_sleeps_total", "Times an idle worker went to sleep in poll().", Type::counter},
    {"ferry_xsk_slab_empty_total", "Refills that found the worker's free stack empty.",
     Type::counter},
    {"ferry_xsk_rejected_frames_total",
     "Frame addresses a slab refused back (outside the slab or freed twice); a bug if not 0.",
     Type::counter},
    {"ferry_xsk_resolution_requests_total",
     "Next hops workers found no MAC for, queued for resolution (or lost: queue full).",
     Type::counter},
    {"ferry_xsk_table_swaps_total", "Table generations each worker picked up.", Type::counter},
    {"ferry_xsk_matched_without_hint_total",
     "Service frames a worker matched itself because the XDP program's match did not come with "
     "them or did not hold; 0 in steady state.",
     Type::counter},
    {"ferry_xsk_quic_lb_routed_total",
     "Requests of QUIC-LB services sent to the backend their connection ID names, by the ID's "
     "config rotation codepoint.",
     Type::counter},
    {"ferry_xsk_quic_lb_fallback_total",
     "Requests of QUIC-LB services the 4-tuple decided (flow table, Maglev), by why their "
     "connection ID did not.",
     Type::counter},
    {"ferry_xsk_fragments_forwarded_total",
     "Fragments of UDP datagrams translated (or routed) and sent on, each as its datagram.",
     Type::counter},
    {"ferry_xsk_fragments_held_total",
     "Later fragments of a datagram held until its first fragment decided where it goes.",
     Type::counter},
    {"ferry_xsk_fragments_made_total",
     "IPv4 fragments cut from datagrams without DF that were larger than the next link's MTU.",
     Type::counter},
    {"ferry_xsk_icmp_translated_total",
     "ICMP errors about balanced datagrams translated and sent to the client or the backend.",
     Type::counter},
    {"ferry_xsk_icmp_sent_total",
     "ICMP errors the workers sent themselves: time exceeded, fragmentation needed / too big.",
     Type::counter},
    {"ferry_xsk_icmp_rate_limited_total",
     "ICMP errors the workers did not send because of the ICMP rate limit.", Type::counter},
    {"ferry_xsk_neighbour_held_total", "Frames held for a next hop whose MAC was being resolved.",
     Type::counter},
    {"ferry_xsk_neighbour_released_total",
     "Held frames sent once their next hop's MAC was published.", Type::counter},
    {"ferry_xsk_neighbour_unreleased_total",
     "Frames that waited for their next hop's MAC and were never sent, by why.", Type::counter},
    {"ferry_xsk_checksums_finished_total",
     "UDP checksums computed after the rewrite: frames that arrived CHECKSUM_PARTIAL, or UDP over "
     "IPv6 with 0.",
     Type::counter},
    {"ferry_xsk_flows", "Entries in use in each worker's UDP flow affinity table.", Type::gauge},
    {"ferry_xsk_flow_hits_total", "Requests sent to the backend their flow's entry names.",
     Type::counter},
    {"ferry_xsk_flow_misses_total",
     "Requests of flows without an entry (new flows), given Maglev's choice.", Type::counter},
    {"ferry_xsk_flow_reassigned_total",
     "Flows whose backend may no longer keep them (disabled, down, removed), given Maglev's "
     "choice.",
     Type::counter},
    {"ferry_xsk_flow_evictions_total",
     "Live flow entries displaced by a new flow because their bucket was full.", Type::counter},
    {"ferry_xsk_flow_expiries_total", "Flow entries freed after the idle timeout.", Type::counter},
    {"ferry_xsk_backend_packets_total",
     "Frames the workers sent to each backend (in: requests, their fragments, ICMP errors about "
     "its replies) and sent on from it (out: its replies, nat services only), summed over workers.",
     Type::counter},
    {"ferry_xsk_backend_bytes_total",
     "IP bytes of those frames (of the inner packet, for an encapsulated one).", Type::counter},
    {"ferry_xsk_backend_slots",
     "Per-backend counter slots of each worker in use (held by a live table) and free.",
     Type::gauge},
    {"ferry_xsk_backends_uncounted",
     "Backends of the running tables without a per-backend counter slot: more (service, backend) "
     "pairs than slots.",
     Type::gauge},
    {"ferry_xsk_table_generation", "Generation of the tables last published to the workers.",
     Type::gauge},
    {"ferry_xsk_socket_info", "1 per AF_XDP socket, with how it is bound.", Type::gauge},
    {"ferry_xsk_neighbours", "Next-hop neighbours with a usable MAC on the fast-path interfaces.",
     Type::gauge},
    {"ferry_xsk_kernel_routes", "Kernel routes out of the fast-path interfaces.", Type::gauge},
    {"ferry_xsk_netlink_events_total",
     "Route and neighbour work of the control thread for the fast path, by kind.", Type::counter},
};

const char* help_of(const char* name) {
  for (const auto& f : kFamilies) {
    if (std::string_view(f.name) == name) return f.help;
  }
  return "";
}

// A worker's QUIC-LB counters (quic_choice.hh), each codepoint and each reason.
void collect_quic_lb(metrics::SnapshotBuilder& out, const WorkerCounters& c,
                     const std::string& worker, const std::string& queue) {
  const char* routed = "ferry_xsk_quic_lb_routed_total";
  for (std::size_t id = 0; id < c.quic_lb_routed.size(); ++id) {
    out.counter(routed, help_of(routed),
                {{"worker", worker}, {"queue", queue}, {"config", std::to_string(id)}},
                static_cast<double>(c.quic_lb_routed[id].value()));
  }
  const char* fallback = "ferry_xsk_quic_lb_fallback_total";
  for (std::size_t r = 0; r < c.quic_lb_fallback.size(); ++r) {
    auto reason = static_cast<quic::QuicLbOutcome>(r);
    if (reason == quic::QuicLbOutcome::routed) continue;
    out.counter(fallback, help_of(fallback),
                {{"worker", worker}, {"queue", queue}, {"reason", std::string(to_string(reason))}},
                static_cast<double>(c.quic_lb_fallback[r].value()));
  }
}

std::string join_queues(const std::vector<std::uint32_t>& queues) {
  std::string out;
  for (std::uint32_t q : queues) out += (out.empty() ? "" : ",") + std::to_string(q);
  return out;
}

}  // namespace

void FastpathPlane::collect(metrics::SnapshotBuilder& out) const {
  for (const auto& f : kFamilies) out.declare(f.name, f.help, f.type);
  auto counter = [&out](const char* name, metrics::Labels labels, std::uint64_t v) {
    out.counter(name, help_of(name), std::move(labels), static_cast<double>(v));
  };
  auto gauge = [&out](const char* name, metrics::Labels labels, double v) {
    out.gauge(name, help_of(name), std::move(labels), v);
  };
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    const Worker& worker = *workers_[w].worker;
    const WorkerCounters& c = worker.counters();
    std::string queue = std::to_string(worker.queue());
    const std::string& name = workers_[w].name;
    for (std::size_t i = 0; i < worker.ports().size(); ++i) {
      const std::string& iface = layout_.ports[worker.ports()[i].slot].ifname;
      const PortCounters& pc = c.ports[i];
      metrics::Labels l{{"worker", name}, {"queue", queue}, {"iface", iface}};
      counter("ferry_xsk_rx_packets_total", l, pc.rx_packets.value());
      counter("ferry_xsk_rx_bytes_total", l, pc.rx_bytes.value());
      counter("ferry_xsk_tx_packets_total", l, pc.tx_packets.value());
      counter("ferry_xsk_tx_bytes_total", l, pc.tx_bytes.value());
      counter("ferry_xsk_tx_kicks_total", l, pc.tx_kicks.value());
      counter("ferry_xsk_tx_kick_errors_total", l, pc.tx_kick_errors.value());
      counter("ferry_xsk_fill_wakeups_total", l, pc.fill_wakeups.value());

      const xsk::XskSocket& socket = *sockets_[w][i];
      xdp_statistics st = socket.statistics();
      metrics::Labels k{{"queue", queue}, {"iface", iface}};
      counter("ferry_xsk_fill_ring_empty_total", k, st.rx_fill_ring_empty_descs);
      auto kernel = [&](const char* reason, std::uint64_t v) {
        counter("ferry_xsk_kernel_drops_total",
                {{"queue", queue}, {"iface", iface}, {"reason", reason}}, v);
      };
      kernel("rx_dropped", st.rx_dropped);
      kernel("rx_ring_full", st.rx_ring_full);
      kernel("rx_invalid_descs", st.rx_invalid_descs);
      kernel("tx_invalid_descs", st.tx_invalid_descs);
      const xsk::BindInfo& b = socket.bind_info();
      gauge("ferry_xsk_socket_info",
            {{"queue", queue},
             {"iface", iface},
             {"mode", b.zerocopy ? "zerocopy" : "copy"},
             {"need_wakeup", b.need_wakeup ? "true" : "false"}},
            1);
    }
    metrics::Labels wl{{"worker", name}, {"queue", queue}};
    for (std::size_t r = 0; r < kDropCount; ++r) {
      counter("ferry_xsk_drops_total",
              {{"worker", name}, {"queue", queue}, {"reason", std::string(to_string(Drop(r)))}},
              c.drops[r].value());
    }
    counter("ferry_xsk_sleeps_total", wl, c.sleeps.value());
    counter("ferry_xsk_slab_empty_total", wl, c.slab_empty.value());
    counter("ferry_xsk_rejected_frames_total", wl, c.rejected_frames.value());
    counter("ferry_xsk_table_swaps_total", wl, c.snapshot_swaps.value());
    counter("ferry_xsk_matched_without_hint_total", wl, c.matched_without_hint.value());
    collect_quic_lb(out, c, name, queue);
    counter("ferry_xsk_neighbour_held_total", wl, c.neighbour_held.value());
    counter("ferry_xsk_fragments_forwarded_total", wl, c.fragments_forwarded.value());
    counter("ferry_xsk_fragments_held_total", wl, c.fragments_held.value());
    counter("ferry_xsk_fragments_made_total", wl, c.fragments_made.value());
    counter("ferry_xsk_icmp_translated_total", wl, c.icmp_translated.value());
    auto icmp_sent = [&](const char* kind, std::uint64_t v) {
      counter("ferry_xsk_icmp_sent_total", {{"worker", name}, {"queue", queue}, {"kind", kind}}, v);
    };
    icmp_sent("time_exceeded", c.icmp_time_exceeded.value());
    icmp_sent("too_big", c.icmp_too_big.value());
    counter("ferry_xsk_icmp_rate_limited_total", wl, c.icmp_rate_limited.value());
    counter("ferry_xsk_neighbour_released_total", wl, c.neighbour_released.value());
    for (std::size_t r = 0; r < kUnreleasedCount; ++r) {
      std::uint64_t v = c.unreleased[r].value() + (w < unreleased_.size() ? unreleased_[w][r] : 0);
      counter(
          "ferry_xsk_neighbour_unreleased_total",
          {{"worker", name}, {"queue", queue}, {"reason", std::string(to_string(Unreleased(r)))}},
          v);
    }
    counter("ferry_xsk_checksums_finished_total",
            {{"worker", name}, {"queue", queue}, {"kind", "partial"}}, c.checksums_partial.value());
    counter("ferry_xsk_checksums_finished_total",
            {{"worker", name}, {"queue", queue}, {"kind", "ipv6_zero"}},
            c.checksums_ipv6_zero.value());
    for (std::size_t k = 0; k < kEncapPathCount; ++k) {
      metrics::Labels el{
          {"worker", name}, {"queue", queue}, {"encap", std::string(to_string(EncapPath(k)))}};
      counter("ferry_xsk_encapsulated_packets_total", el, c.encapsulated_packets[k].value());
      counter("ferry_xsk_encapsulated_bytes_total", el, c.encapsulated_bytes[k].value());
    }
    const FlowCounters& f = c.flows;
    gauge("ferry_xsk_flows", wl, static_cast<double>(f.entries.value()));
    counter("ferry_xsk_flow_hits_total", wl, f.hits.value());
    counter("ferry_xsk_flow_misses_total", wl, f.misses.value());
    counter("ferry_xsk_flow_reassigned_total", wl, f.reassigned.value());
    counter("ferry_xsk_flow_evictions_total", wl, f.evictions.value());
    counter("ferry_xsk_flow_expiries_total", wl, f.expiries.value());
    counter("ferry_xsk_resolution_requests_total",
            {{"worker", name}, {"queue", queue}, {"result", "queued"}},
            c.resolutions_requested.value());
    counter("ferry_xsk_resolution_requests_total",
            {{"worker", name}, {"queue", queue}, {"result", "queue_full"}},
            c.resolution_queue_full.value());

    xsk::FrameAccount a = worker.published_account();
    gauge("ferry_xsk_slab_frames", {{"queue", queue}}, static_cast<double>(a.slab_frames));
    const std::pair<const char*, std::uint64_t> terms[] = {
        {"free", a.free_stack}, {"fill", a.fill}, {"rx", a.rx},
        {"hands", a.in_hands},  {"tx", a.tx},     {"completion", a.completion}};
    for (const auto& [where, v] : terms) {
      gauge("ferry_xsk_frames", {{"queue", queue}, {"where", where}}, static_cast<double>(v));
    }
  }
  collect_backends(out);
  gauge("ferry_xsk_table_generation", {}, static_cast<double>(board_->generation()));
  auto tables = watch_->tables();
  gauge("ferry_xsk_neighbours", {}, static_cast<double>(tables->neighbours.size()));
  gauge("ferry_xsk_kernel_routes", {}, static_cast<double>(tables->routes.routes().size()));
  const NextHopWatchStats& s = watch_->stats();
  const std::pair<const char*, std::uint64_t> events[] = {{"notification", s.notifications},
                                                          {"resync", s.resyncs},
                                                          {"rebuild", s.rebuilds},
                                                          {"resolution_sent", s.resolutions_sent},
                                                          {"resolution_error", s.resolution_errors},
                                                          {"stale_refresh", s.stale_refreshes},
                                                          {"query", s.queries},
                                                          {"adopted", s.adopted},
                                                          {"restart", s.restarts}};
  for (const auto& [kind, v] : events) {
    counter("ferry_xsk_netlink_events_total", {{"kind", kind}}, v);
  }
}

void FastpathPlane::collect_backends(metrics::SnapshotBuilder& out) const {
  auto counter = [&out](const char* name, metrics::Labels labels, std::uint64_t v) {
    out.counter(name, help_of(name), std::move(labels), static_cast<double>(v));
  };
  for (const packet::Service& service : config_tables_->services.services()) {
    for (std::size_t b = 0; b < service.backends.size(); ++b) {
      std::uint32_t slot = service.counter_slot(b);
      if (slot == packet::kNoCounterSlot) continue;
      BackendTotals t =
          backend_totals(slot, slot < backend_base_.size() ? backend_base_[slot] : BackendTotals{});
      std::string backend = service.backends[b].to_string();
      auto labels = [&](const char* direction) {
        return metrics::Labels{
            {"service", service.name}, {"backend", backend}, {"direction", direction}};
      };
      counter("ferry_xsk_backend_packets_total", labels("in"), t.in_packets);
      counter("ferry_xsk_backend_bytes_total", labels("in"), t.in_bytes);
      // Replies of an encapsulating service's backends go to the clients directly.
      if (service.encapsulates()) continue;
      counter("ferry_xsk_backend_packets_total", labels("out"), t.out_packets);
      counter("ferry_xsk_backend_bytes_total", labels("out"), t.out_bytes);
    }
  }
  auto gauge = [&out](const char* name, metrics::Labels labels, double v) {
    out.gauge(name, help_of(name), std::move(labels), v);
  };
  gauge("ferry_xsk_backend_slots", {{"state", "used"}}, backend_slots_.used());
  gauge("ferry_xsk_backend_slots", {{"state", "free"}}, backend_slots_.free());
  gauge("ferry_xsk_backends_uncounted", {}, config_tables_->backend_slots.uncounted());
}

void FastpathPlane::annotate_status(nlohmann::json& xdp_status) const {
  if (!xdp_status.is_object() || !xdp_status.contains("interfaces")) return;
  for (nlohmann::json& iface : xdp_status["interfaces"]) {
    auto slot = layout_.slot_of(iface.value("name", ""));
    if (!slot) continue;
    const PortSpec& port = layout_.ports[*slot];
    const xsk::XskSocket* any = nullptr;
    for (const auto& sockets : sockets_) {
      for (const xsk::XskSocket* s : sockets) {
        if (s->ifname() == port.ifname) any = s;
      }
    }
    iface["xsk_queues"] = join_queues(port.queues);
    if (any) {
      iface["xsk_mode"] = any->bind_info().zerocopy ? "zerocopy" : "copy";
      iface["need_wakeup"] = any->bind_info().need_wakeup;
    }
  }
  std::uint64_t slab = workers_.empty() ? 0 : workers_.front().worker->slab().frame_count();
  xdp_status["fastpath"] = {
      {"workers", workers_.size()},
      {"queues", join_queues(layout_.queues)},
      {"umem_frames", xdp_config_.umem.frames},
      {"frame_bytes", xdp_config_.umem.frame_bytes},
      {"slab_frames", slab},
      {"flow_entries", xdp_config_.flows.entries},
      {"flow_table_bytes", workers_.empty() ? 0 : workers_.front().worker->flows().memory_bytes()},
      {"hugepages", umem_->pool().on_hugepages()},
      {"table_generation", board_->generation()},
      {"kernel_routes", watch_->tables()->routes.routes().size()},
      {"neighbours", watch_->tables()->neighbours.size()},
  };
}

nlohmann::json FastpathPlane::worker_details() const {
  nlohmann::json out = nlohmann::json::object();
  for (const WorkerThread& t : workers_) {
    const Worker& w = *t.worker;
    std::uint64_t rx = 0, tx = 0, drops = 0;
    std::string ports;
    for (std::size_t i = 0; i < w.ports().size(); ++i) {
      rx += w.counters().ports[i].rx_packets.value();
      tx += w.counters().ports[i].tx_packets.value();
      ports += (ports.empty() ? "" : ",") + layout_.ports[w.ports()[i].slot].ifname;
    }
    for (const auto& d : w.counters().drops) drops += d.value();
    out[t.name] = {{"queue", w.queue()},
                   {"cpu", t.cpu},
                   {"ports", ports},
                   {"rx_packets", rx},
                   {"tx_packets", tx},
                   {"drops", drops},
                   {"flows", w.counters().flows.entries.value()},
                   {"flow_capacity", w.flows().capacity()},
                   {"table_generation", w.snapshot_generation()}};
  }
  return out;
}

}  // namespace ferry::fastpath
