// The AF_XDP worker loop.
#include "lib/fastpath/worker.hh"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "lib/fastpath/encap_step.hh"
#include "lib/fastpath/ip_hop.hh"
#include "lib/packet/bytes.hh"
#include "lib/packet/fragment.hh"
#include "lib/xsk/recycle.hh"
#include "lib/xsk/wakeup.hh"

namespace ferry::fastpath {
namespace {

// Fragments waiting for their first are UMEM frames too: an eighth of the slab at most, so the
// fill rings never starve (with the neighbour hold queue's quarter, under half in all).
FragmentTable::Limits fragment_limits(std::uint32_t slab_frames) {
  FragmentTable::Limits limits;
  limits.held_frames = std::min(limits.held_frames, std::max(slab_frames / 8, 1u));
  return limits;
}

constexpr std::uint64_t kFragmentSweepEveryMs = 10;

// The XDP program's match of a frame, from the metadata area just before it in the UMEM
// (`headroom`: the bytes of its UMEM frame before it). Anything else there (no metadata, an
// older program's, another frame's left over) is either no hint or one the service table checks
// against the frame before taking it.
packet::MatchHint hint_before(const std::byte* data, std::uint64_t headroom) noexcept {
  bpf::ferry_frame_meta meta;
  if (headroom < sizeof(meta)) return {};
  std::memcpy(&meta, data - sizeof(meta), sizeof(meta));
  if (meta.magic != FERRY_META_MAGIC) return {};
  switch (meta.kind) {
    case bpf::FERRY_META_TO_SERVICE:
      return {packet::MatchKind::to_service, meta.service_id, 0};
    case bpf::FERRY_META_FROM_BACKEND:
      return {packet::MatchKind::from_backend, meta.service_id, meta.backend};
    default:
      return {};
  }
}

}  // namespace

Worker::Worker(const WorkerOptions& options, xsk::UmemSlab slab, std::vector<WorkerPort> ports,
               SnapshotBoard::Reader reader)
    : options_(options),
      slab_(std::move(slab)),
      ports_(std::move(ports)),
      reader_(reader),
      held_(HoldQueue::for_slab(slab_.frame_count())),
      flows_(options.flows.entries, options.flows.idle_timeout_ms, counters_.flows),
      fragments_(fragment_limits(slab_.frame_count())) {
  if (options_.burst == 0 || options_.burst > kMaxBurst) {
    throw std::invalid_argument("worker burst must be 1.." + std::to_string(kMaxBurst));
  }
  if (ports_.empty() || ports_.size() > FERRY_MAX_INTERFACES) {
    throw std::invalid_argument("a worker serves 1.." + std::to_string(FERRY_MAX_INTERFACES) +
                                " ports");
  }
  port_of_slot_.fill(-1);
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i].slot >= FERRY_MAX_INTERFACES) throw std::invalid_argument("port slot too large");
    port_of_slot_[ports_[i].slot] = static_cast<std::int8_t>(i);
    rings_.push_back(ports_[i].rings);
  }
}

void Worker::prime() {
  for (WorkerPort& port : ports_) {
    std::uint32_t got = xsk::refill(port.rings.fill, slab_, port.fill_target);
    if (got < port.fill_target) counters_.slab_empty.add();
  }
  publish_account();
}

bool Worker::poll_once() {
  const Snapshot& snapshot = reader_.current();
  if (reader_.generation() != seen_generation_.load(std::memory_order_relaxed)) {
    seen_generation_.store(reader_.generation(), std::memory_order_relaxed);
    counters_.snapshot_swaps.add();
  }
  bool work = false;
  for (std::uint32_t i = 0; i < ports_.size(); ++i) work |= recycle(i);
  if (!held_.empty()) work |= serve_held(snapshot);
  if (fragments_.held_count() != 0 || fragments_.datagrams_in_use() != 0) {
    work |= sweep_fragments(FlowTable::clock_ms());
  }
  // One clock read per turn with frames serves every frame of its bursts (flow ages are in
  // coarse ticks); an idle spin reads none.
  FlowAffinity flows;
  for (std::uint32_t i = 0; i < ports_.size(); ++i) {
    if (receive(i, snapshot, flows) > 0) {
      work = true;
      // Transmit after each port's burst: the staging arrays hold one burst (stage() sends a
      // full one early).
      for (std::uint32_t e = 0; e < ports_.size(); ++e) transmit(e);
    }
  }
  for (std::uint32_t i = 0; i < ports_.size(); ++i) kick(i);
  if (work && flows_.enabled()) {
    flows_.sweep(flows.table ? flows.now_ms : FlowTable::clock_ms(), kFlowSweepSlotsPerTurn);
  }
  return work;
}

std::uint32_t Worker::receive(std::uint32_t port_index, const Snapshot& snapshot,
                              FlowAffinity& flows) {
  WorkerPort& port = ports_[port_index];
  xsk::RingSlices<const xdp_desc> got = port.rings.rx.peek(options_.burst);
  if (got.empty()) {
    if (port.fd >= 0 && xsk::wake_fill(port.fd, port.rings.fill) != xsk::Wakeup::not_needed) {
      counters_.ports[port_index].fill_wakeups.add();
    }
    return 0;
  }
  if (!flows.table && flows_.enabled()) flows = {&flows_, FlowTable::clock_ms()};
  std::uint64_t dropped[kMaxBurst];
  std::uint32_t dropped_count = 0;
  std::array<std::uint32_t, kDropCount> drops{};
  std::uint64_t bytes = 0;
  std::uint64_t requested = counters_.resolutions_requested.value();
  FrameSinks sinks{resolutions_, counters_, &backend_counters_};
  const std::uint64_t now_ms = flows.table ? flows.now_ms : FlowTable::clock_ms();
  for (std::uint32_t k = 0; k < got.size(); ++k) {
    const xdp_desc d = got[k];
    bytes += d.len;
    std::byte* data = slab_.packet(d.addr, d.len);
    if (!data) {  // not this slab's frame: the kernel handed us garbage; never touch it
      ++drops[static_cast<std::size_t>(Drop::malformed)];
      counters_.rejected_frames.add();
      continue;
    }
    packet::MatchHint hint;
    if (options_.match_hints) hint = hint_before(data, d.addr - slab_.frame_base(d.addr));
    FrameOutcome o = process_frame(packet::frame_bytes(data, d.len), snapshot, port.slot, sinks,
                                   flows, ip_hop(d.addr, d.len, now_ms), hint);
    if (orphan_count_ != 0) free_orphans();
    if (o.length != 0 || o.fragment_mtu != 0 || o.fate == Fate::wait || o.release != kNoDatagram) {
      // Dropped, the frame is freed by its own address; sent or held, from where it now starts.
      dispose(d.addr, d.len, o, snapshot, now_ms, drops);
      if (o.release != kNoDatagram) release_fragments(o.release, snapshot, now_ms, drops);
      continue;
    }
    if (o.fate != Fate::drop) {
      std::int8_t egress = o.egress_slot < FERRY_MAX_INTERFACES ? port_of_slot_[o.egress_slot] : -1;
      if (egress < 0) {
        o.drop = Drop::no_tx_queue;
      } else if (o.fate == Fate::forward) {
        // Not one staged frame per frame received: the frames cut into pieces and the held
        // fragments a first one releases are staged in the same burst.
        stage(egress, d.addr, d.len);
        continue;
      } else if (held_.hold(o.next_hop, o.egress_slot, d.addr, d.len)) {
        counters_.neighbour_held.add();
        continue;
      } else {
        o.drop = Drop::neighbour_hold_full;
        counters_.unreleased[static_cast<std::size_t>(Unreleased::hold_full)].add();
      }
    }
    ++drops[static_cast<std::size_t>(o.drop)];
    dropped[dropped_count++] = d.addr;
  }
  port.rings.rx.release(got.size());
  counters_.ports[port_index].rx_packets.add(got.size());
  counters_.ports[port_index].rx_bytes.add(bytes);
  for (std::size_t r = 0; r < kDropCount; ++r) {
    if (drops[r]) counters_.drops[r].add(drops[r]);
  }
  free_frames({dropped, dropped_count});
  if (counters_.resolutions_requested.value() != requested && options_.resolve_wake_fd >= 0) {
    std::uint64_t one = 1;
    if (::write(options_.resolve_wake_fd, &one, sizeof(one)) < 0) {
      // EAGAIN: a wake is pending already; the control thread's housekeeping drains anyway.
    }
  }
  return got.size();
}

IpHop Worker::ip_hop(std::uint64_t addr, std::uint32_t len, std::uint64_t now_ms) {
  std::uint64_t end = slab_.frame_base(addr) + slab_.frame_bytes();
  std::uint32_t room = end > addr + len ? static_cast<std::uint32_t>(end - addr - len) : 0;
  auto headroom = static_cast<std::uint32_t>(addr - slab_.frame_base(addr));
  return IpHop{&fragments_, &icmp_limit_,   &next_ip_id_, now_ms,      room,
               orphans_,    &orphan_count_, headroom,     &tunnel_cut_};
}

void Worker::dispose(std::uint64_t addr, std::uint32_t len, const FrameOutcome& o,
                     const Snapshot& snapshot, std::uint64_t now_ms,
                     std::array<std::uint32_t, kDropCount>& drops) {
  if (tunnel_cut_.frame != nullptr && o.fragment_mtu != 0 &&
      tunnel_cut_.frame == reinterpret_cast<const std::uint8_t*>(slab_.packet(addr, len))) {
    cut_and_encapsulate(addr, len, snapshot, now_ms, drops);
    return;
  }
  if (o.length != 0) len = o.length;
  if (o.fate == Fate::forward || o.fate == Fate::hold) addr -= o.front;
  Drop why = o.drop;
  if (o.fate == Fate::wait) {
    if (fragments_.hold(o.datagram, addr, len, now_ms)) {
      counters_.fragments_held.add();
      return;
    }
    why = Drop::fragment_hold_full;
  } else if (o.fate != Fate::drop) {
    std::int8_t egress = o.egress_slot < FERRY_MAX_INTERFACES ? port_of_slot_[o.egress_slot] : -1;
    if (egress >= 0) {
      if (o.fragment_mtu != 0) {
        cut_and_send(egress, addr, len, o, drops);
      } else {
        send_or_hold(egress, addr, len, o, drops);
      }
      return;
    }
    why = Drop::no_tx_queue;
  }
  ++drops[static_cast<std::size_t>(why)];
  free_frames({&addr, 1});
}

void Worker::send_or_hold(std::int8_t egress, std::uint64_t addr, std::uint32_t len,
                          const FrameOutcome& o, std::array<std::uint32_t, kDropCount>& drops) {
  if (o.fate == Fate::forward) {
    stage(egress, addr, len);
    return;
  }
  if (held_.hold(o.next_hop, o.egress_slot, addr, len)) {
    counters_.neighbour_held.add();
    return;
  }
  ++drops[static_cast<std::size_t>(Drop::neighbour_hold_full)];
  counters_.unreleased[static_cast<std::size_t>(Unreleased::hold_full)].add();
  free_frames({&addr, 1});
}

std::uint32_t Worker::cut(std::uint64_t addr, std::uint32_t len, std::uint32_t mtu,
                          std::uint32_t offset,
                          std::span<std::uint64_t, packet::kMaxFragmentPieces> pieces,
                          std::span<std::uint32_t, packet::kMaxFragmentPieces> lengths,
                          std::array<std::uint32_t, kDropCount>& drops) {
  packet::FrameBytes frame = packet::frame_bytes(slab_.packet(addr, len), len);
  packet::ParsedPacket p;
  packet::Fragment f;
  packet::ParseError err = packet::parse_frame(frame, p);
  bool parsed = err == packet::ParseError::none ||
                (err == packet::ParseError::ipv4_fragment &&
                 packet::parse_fragment(frame, p, f) == packet::FragmentParse::fragment);
  std::uint32_t count = parsed ? packet::ipv4_fragment_count(p, mtu) : 0;
  std::array<std::uint64_t, packet::kMaxFragmentPieces> extra{};
  std::uint32_t got = 0;
  if (count >= 1 && count <= packet::kMaxFragmentPieces)
    got = slab_.alloc({extra.data(), count - 1});
  const std::uint32_t frame_room = slab_.frame_bytes() - offset;
  std::array<packet::FrameBytes, packet::kMaxFragmentPieces> more{};
  for (std::uint32_t i = 0; i < got; ++i) {
    more[i] = packet::frame_bytes(slab_.packet(extra[i] + offset, frame_room), frame_room);
  }
  if (count == 0 || count > packet::kMaxFragmentPieces || got < count - 1 ||
      !packet::fragment_ipv4(frame, p, mtu, {more.data(), count - 1}, lengths.first(count))) {
    if (count >= 1 && got < count - 1) counters_.slab_empty.add();
    free_frames({extra.data(), got});
    ++drops[static_cast<std::size_t>(Drop::too_big)];
    free_frames({&addr, 1});
    return 0;
  }
  counters_.fragments_made.add(count);
  pieces[0] = addr;
  for (std::uint32_t i = 0; i + 1 < count; ++i) pieces[i + 1] = extra[i] + offset;
  return count;
}

// An IPv4 datagram (or fragment) without DF over the egress MTU, routed already: cut into
// fragments as a router does, the first in its own frame, the others in frames of the slab.
void Worker::cut_and_send(std::int8_t egress, std::uint64_t addr, std::uint32_t len,
                          const FrameOutcome& o, std::array<std::uint32_t, kDropCount>& drops) {
  std::array<std::uint64_t, packet::kMaxFragmentPieces> pieces{};
  std::array<std::uint32_t, packet::kMaxFragmentPieces> lengths{};
  const std::uint32_t count = cut(addr, len, o.fragment_mtu, 0, pieces, lengths, drops);
  for (std::uint32_t i = 0; i < count; ++i) send_or_hold(egress, pieces[i], lengths[i], o, drops);
}

// An IPv4 packet without DF too big for its tunnel, settled by encapsulate_as() (checksum, hop
// limit): cut as a router cuts it, then each piece in its own outer header to the backend the
// whole was bound for, which reassembles them. The pieces keep the frame's headroom for that.
void Worker::cut_and_encapsulate(std::uint64_t addr, std::uint32_t len, const Snapshot& snapshot,
                                 std::uint64_t now_ms,
                                 std::array<std::uint32_t, kDropCount>& drops) {
  const TunnelCut asked = std::exchange(tunnel_cut_, TunnelCut{});
  const auto headroom = static_cast<std::uint32_t>(addr - slab_.frame_base(addr));
  std::array<std::uint64_t, packet::kMaxFragmentPieces> pieces{};
  std::array<std::uint32_t, packet::kMaxFragmentPieces> lengths{};
  const std::uint32_t count = cut(addr, len, asked.inner_mtu, headroom, pieces, lengths, drops);
  FrameSinks sinks{resolutions_, counters_, &backend_counters_};
  for (std::uint32_t i = 0; i < count; ++i) {
    packet::FrameBytes piece = packet::frame_bytes(slab_.packet(pieces[i], lengths[i]), lengths[i]);
    packet::ParsedPacket p;
    packet::Fragment f;
    FrameOutcome po = FrameOutcome::dropped(Drop::malformed);
    if (packet::parse_fragment(piece, p, f) == packet::FragmentParse::fragment) {
      po = encapsulate_piece(piece, p, asked.target, snapshot, sinks,
                             ip_hop(pieces[i], lengths[i], now_ms));
    }
    dispose(pieces[i], lengths[i], po, snapshot, now_ms, drops);
  }
}

void Worker::release_fragments(std::uint32_t datagram, const Snapshot& snapshot,
                               std::uint64_t now_ms, std::array<std::uint32_t, kDropCount>& drops) {
  FrameSinks sinks{resolutions_, counters_, &backend_counters_};
  std::array<FragmentTable::HeldFrame, 32> taken;
  for (std::uint32_t n; (n = fragments_.take_held(datagram, taken)) != 0;) {
    for (std::uint32_t i = 0; i < n; ++i) {
      const FragmentTable::HeldFrame& h = taken[i];
      FrameOutcome o =
          follow_held(packet::frame_bytes(slab_.packet(h.addr, h.len), h.len), snapshot, sinks,
                      fragments_, datagram, ip_hop(h.addr, h.len, now_ms));
      dispose(h.addr, h.len, o, snapshot, now_ms, drops);
    }
  }
}

void Worker::free_orphans() {
  counters_.drops[static_cast<std::size_t>(Drop::fragment_hold_full)].add(orphan_count_);
  free_frames({orphans_.data(), orphan_count_});
  orphan_count_ = 0;
}

bool Worker::sweep_fragments(std::uint64_t now_ms) {
  if (now_ms < next_fragment_sweep_ms_) return false;
  next_fragment_sweep_ms_ = now_ms + kFragmentSweepEveryMs;
  std::uint32_t expired = fragments_.sweep(now_ms, [this](const FragmentTable::HeldFrame& h) {
    free_frames({&h.addr, 1});
  });
  counters_.drops[static_cast<std::size_t>(Drop::fragment_timeout)].add(expired);
  return expired > 0;
}

void Worker::stage(std::int8_t port_index, std::uint64_t addr, std::uint32_t len) {
  if (staged_count_[port_index] == kMaxBurst) transmit(port_index);
  staged_[port_index][staged_count_[port_index]++] = xdp_desc{addr, len, 0};
}

bool Worker::serve_held(const Snapshot& snapshot) {
  std::uint32_t moved = 0;
  if (reader_.generation() != held_checked_generation_) {
    held_checked_generation_ = reader_.generation();
    std::uint32_t sent = held_.release(
        snapshot.next_hops->neighbours,
        [this](const HoldQueue::Frame& f, const packet::MacAddress& mac) {
          std::byte* data = slab_.packet(f.addr, f.len);
          std::memcpy(data, mac.data(), mac.size());  // the rest was rewritten when it was held
          stage(port_of_slot_[f.egress_slot], f.addr, f.len);
        });
    if (sent > 0) {
      counters_.neighbour_released.add(sent);
      for (std::uint32_t e = 0; e < ports_.size(); ++e) transmit(e);
      moved += sent;
    }
  }
  // The clock is read only while frames are held. A next hop that ran out is reported to the
  // control thread, which says why and has its next miss solicit it afresh.
  std::uint32_t expired = held_.expire(
      std::chrono::steady_clock::now(),
      [this](const HoldQueue::Frame& f) {
        free_frames({&f.addr, 1});
      },
      [this](const NeighbourKey& key, std::uint32_t frames) {
        if (resolutions_.push_timeout(key, frames) != Queued::added) {
          counters_.unreleased[static_cast<std::size_t>(Unreleased::unclassified)].add(frames);
        }
      });
  if (expired > 0) {
    counters_.drops[static_cast<std::size_t>(Drop::neighbour_timeout)].add(expired);
    moved += expired;
  }
  return moved > 0;
}

void Worker::transmit(std::uint32_t port_index) {
  std::uint32_t count = staged_count_[port_index];
  if (count == 0) return;
  staged_count_[port_index] = 0;
  const xdp_desc* staged = staged_[port_index].data();
  std::uint32_t sent = ports_[port_index].rings.tx.push({staged, count});
  std::uint64_t bytes = 0;
  for (std::uint32_t k = 0; k < sent; ++k) bytes += staged[k].len;
  PortCounters& c = counters_.ports[port_index];
  c.tx_packets.add(sent);
  c.tx_bytes.add(bytes);
  if (sent < count) {
    std::uint64_t full[kMaxBurst];
    for (std::uint32_t k = sent; k < count; ++k) full[k - sent] = staged[k].addr;
    counters_.drops[static_cast<std::size_t>(Drop::tx_ring_full)].add(count - sent);
    free_frames({full, count - sent});
  }
}

void Worker::kick(std::uint32_t port_index) {
  WorkerPort& port = ports_[port_index];
  if (port.fd < 0) return;
  std::uint32_t in_flight = port.rings.tx.producer_word() - port.rings.completion.producer_word();
  if (in_flight == 0) return;
  // Copy mode sends at most 32 frames per sendto(); "busy" means there is more to send.
  for (int attempt = 0; attempt < 4; ++attempt) {
    xsk::Wakeup w = xsk::kick_tx(port.fd, port.rings.tx, port.need_wakeup);
    if (w == xsk::Wakeup::not_needed) return;
    counters_.ports[port_index].tx_kicks.add();
    if (w == xsk::Wakeup::failed) {
      counters_.ports[port_index].tx_kick_errors.add();
      return;
    }
    if (w == xsk::Wakeup::sent) return;
  }
}

bool Worker::recycle(std::uint32_t port_index) {
  WorkerPort& port = ports_[port_index];
  xsk::QueueRings& r = port.rings;
  std::uint32_t on_fill_side = r.fill.producer_word() - r.rx.producer_word();
  std::uint32_t need = port.fill_target > on_fill_side ? port.fill_target - on_fill_side : 0;
  // Completions go straight back to this socket's fill ring while it is below its target...
  std::uint32_t moved = 0;
  if (need > 0) {
    xsk::RecycleResult rr =
        xsk::recycle_completions(r.completion, r.fill, slab_, std::min(need, options_.burst));
    moved = rr.to_fill + rr.to_slab;
    need -= std::min(need, rr.to_fill);
    if (rr.rejected) counters_.rejected_frames.add(rr.rejected);
  }
  // ... and the rest into the free stack, from which any of the worker's sockets refills.
  xsk::RingSlices<const std::uint64_t> done = r.completion.peek(options_.burst);
  if (!done.empty()) {
    free_frames(done.head);
    free_frames(done.tail);
    r.completion.release(done.size());
    moved += done.size();
  }
  if (need > 0) {
    std::uint32_t got = xsk::refill(r.fill, slab_, need);
    if (got < need && slab_.free_count() == 0) counters_.slab_empty.add();
  }
  return moved > 0;
}

void Worker::free_frames(std::span<const std::uint64_t> addrs) {
  if (addrs.empty()) return;
  xsk::SlabFreeResult f = slab_.free(addrs);
  if (f.outside_slab + f.double_free) counters_.rejected_frames.add(f.outside_slab + f.double_free);
}

std::uint32_t Worker::tx_in_flight() const {
  std::uint32_t total = 0;
  for (const WorkerPort& p : ports_) {
    total += p.rings.tx.producer_word() - p.rings.completion.producer_word();
  }
  return total;
}

xsk::FrameAccount Worker::account() const {
  return xsk::account_frames(slab_, rings_, held_.size() + fragments_.held_count());
}

void Worker::run(const std::atomic<bool>& stop, int wake_fd, const std::function<void()>& beat) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kBeatEvery = std::chrono::milliseconds(50);
  std::vector<pollfd> fds;
  for (const WorkerPort& p : ports_) fds.push_back({p.fd, POLLIN, 0});
  fds.push_back({wake_fd, POLLIN, 0});
  xsk::IdleSpin idle(options_.idle_spin_turns);
  constexpr std::uint32_t kTurnsPerClockRead = 64;  // a busy turn is ~1 us; the clock ~20 ns
  auto last_beat = Clock::now();
  beat();
  for (std::uint32_t turn = 1; !stop.load(std::memory_order_acquire); ++turn) {
    bool work = poll_once();
    if (turn % kTurnsPerClockRead == 0) {
      auto now = Clock::now();
      if (now - last_beat >= kBeatEvery) {
        beat();
        publish_account();
        last_beat = now;
      }
    }
    // Frames waiting for transmission keep the worker awake: copy mode sends them only from
    // inside sendto(), and no readiness event would wake a sleeper for them.
    if (!idle.should_sleep(work)) continue;
    bool tx_stuck = tx_in_flight() > 0;
    publish_account();
    if (flows_.enabled()) flows_.sweep(FlowTable::clock_ms(), kFlowSweepSlotsIdle);
    counters_.sleeps.add();
    // A stuck tx ring (link down) is retried every few ms instead of spinning; held frames every
    // millisecond, since a snapshot with their next hop's MAC wakes no poll().
    int timeout_ms = !held_.empty() ? 1 : tx_stuck ? 5 : options_.sleep_timeout_ms;
    xsk::wait_for_rx(fds, timeout_ms);
    for (auto& f : fds) f.revents = 0;
    beat();
    last_beat = Clock::now();
  }
  // Held frames go back to the slab: the worker stops, and nothing will send them.
  std::uint32_t stopped = held_.clear([this](const HoldQueue::Frame& f) {
    free_frames({&f.addr, 1});
  });
  counters_.unreleased[static_cast<std::size_t>(Unreleased::stopped)].add(stopped);
  fragments_.clear([this](const FragmentTable::HeldFrame& f) { free_frames({&f.addr, 1}); });
  publish_account();
  reader_.park();
}

}  // namespace ferry::fastpath
