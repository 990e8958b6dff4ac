// What a worker does with one received frame: parse, match a service (balance or reflect) or a
// configured route, find the next hop, rewrite in place, finish a partial checksum; as an IP hop
// also fragments (ip_hop.hh), ICMP errors about balanced datagrams, and the errors the gateway
// owes (time exceeded, fragmentation needed). Returns where the frame goes, that it waits for its
// next hop's MAC or its first fragment, or why it is dropped, in the fate vocabulary of
// lib/packet/fate.hh. No allocation, lock, exception, virtual call or std::function.
#pragma once

#include <cstdint>

#include "lib/fastpath/backend_counters.hh"
#include "lib/fastpath/encap_target.hh"
#include "lib/fastpath/flow_table.hh"
#include "lib/fastpath/fragment_table.hh"
#include "lib/fastpath/resolution_queue.hh"
#include "lib/fastpath/snapshot.hh"
#include "lib/fastpath/worker_counters.hh"
#include "lib/packet/bytes.hh"
#include "lib/packet/fate.hh"
#include "lib/packet/icmp_rate_limit.hh"
#include "lib/packet/service_table.hh"

namespace ferry::fastpath {

using packet::Fate;

inline constexpr std::uint32_t kNoDatagram = ~0u;

// A Verdict with what the worker needs to carry it out: forward on egress_slot, hold for next_hop,
// drop (counted as `drop`), wait in the fragment table.
struct FrameOutcome {
  Fate fate = Fate::drop;
  std::uint32_t egress_slot = 0;  // forward, hold: the port slot to transmit on
  Drop drop = Drop::unexpected;   // drop: why
  NeighbourKey next_hop{};        // hold: whose MAC the frame waits for
  // forward, hold: the frame's length now, when the action changed it (an ICMP error was built
  // in it, the frame's own bytes and the room after them); 0: unchanged.
  std::uint32_t length = 0;
  // forward, hold: how many bytes the frame grew at its front (an outer header of direct server
  // return): it starts that much earlier in its UMEM frame, `length` bytes long.
  std::uint32_t front = 0;
  // forward, hold: an IPv4 datagram without DF larger than the egress MTU, to be cut into
  // fragments of at most this many IP bytes before it is sent or held; 0: fits. Also set when
  // the packet is to be cut for a tunnel instead (IpHop::tunnel_cut names it). No field of its
  // own for that: 4 bytes more here cost every frame 7-9 ns (tests/bench/packet/frame_ab.sh).
  std::uint32_t fragment_mtu = 0;
  // wait: the fragment table's slot of its datagram. Any fate: a first fragment decided its
  // datagram (or had it refused): the later fragments held for this slot are to be processed.
  std::uint32_t datagram = kNoDatagram;
  std::uint32_t release = kNoDatagram;

  static FrameOutcome to(std::uint32_t slot) { return {Fate::forward, slot}; }
  static FrameOutcome held(std::uint32_t slot, const NeighbourKey& next_hop) {
    return {Fate::hold, slot, Drop::unexpected, next_hop};
  }
  static FrameOutcome dropped(Drop why) { return {Fate::drop, 0, why}; }
  static FrameOutcome waiting(std::uint32_t datagram) {
    FrameOutcome o{Fate::wait};
    o.datagram = datagram;
    return o;
  }
  bool operator==(const FrameOutcome&) const = default;
};

// What process_frame reports besides the outcome: next hops to resolve go to the worker's
// resolution queue, what happened (requests, finished checksums) to its counters, and what each
// backend was sent and replied to its per-backend counters (none: not counted per backend).
struct FrameSinks {
  ResolutionQueue& queue;
  WorkerCounters& counters;
  BackendCounters* backends = nullptr;

  // A frame sent to the backend in counter slot `slot` (Service::counter_slot), or a reply of it
  // sent on to the client: `ip_bytes` long, its IP header and payload.
  void to_backend(std::uint32_t slot, std::uint32_t ip_bytes) const noexcept {
    if (backends) backends->count_in(slot, ip_bytes);
  }
  void from_backend(std::uint32_t slot, std::uint32_t ip_bytes) const noexcept {
    if (backends) backends->count_out(slot, ip_bytes);
  }
};

// The worker's flow affinity table and its batch's clock (FlowTable::clock_ms()). No table:
// every request gets Maglev's choice, as does every request of a service without flow affinity.
struct FlowAffinity {
  FlowTable* table = nullptr;
  std::uint32_t now_ms = 0;
};

// The worker's IP-hop state: its fragment table, its ICMP rate limit and identification counter,
// the batch's clock, and how many bytes after the frame's end the frame may grow into (up to the
// end of its UMEM frame: an ICMP error about a small datagram is larger than the datagram) and
// before its start (`headroom`: an encapsulated request's outer header). Frames
// the fragment table gives up while processing one (a full bucket's oldest datagram) are appended
// to `orphans` (capacity: the table's held_frames) for the worker to free. No table: fragments are
// dropped as unexpected; no rate limit: no error is sent.
// An IPv4 packet without DF to an encapsulating service, too big for its tunnel, settled whole
// (checksum finished, one hop less, not yet encapsulated): to be cut into fragments of at most
// inner_mtu IP bytes, each encapsulated to `target` (encapsulate_piece()), as a router fragments
// what it may. Its outcome is forward with fragment_mtu = inner_mtu; `frame` tells it from a
// routed packet to cut (null: nothing asked).
struct TunnelCut {
  const std::uint8_t* frame = nullptr;
  std::uint32_t inner_mtu = 0;
  EncapTarget target{};
};

struct IpHop {
  FragmentTable* fragments = nullptr;
  packet::IcmpRateLimit* icmp_limit = nullptr;
  std::uint16_t* next_ip_id = nullptr;
  std::uint64_t now_ms = 0;
  std::uint32_t room = 0;
  std::span<std::uint64_t> orphans;
  std::uint32_t* orphan_count = nullptr;
  // How many bytes before the frame's start in its UMEM frame it may grow into (an outer header).
  std::uint32_t headroom = 0;
  // Where encapsulate_as() asks for a packet to be cut for its tunnel (TunnelCut); none (tests
  // of one frame): such a packet is answered with fragmentation needed instead.
  TunnelCut* tunnel_cut = nullptr;
};

// `frame` is rewritten in place when forwarded (and may be partly rewritten when dropped).
// `ingress_slot` is the slot of the port the frame arrived on (reflect sends it back there).
// `hint`: the XDP program's match of the frame (ServiceTable::match(p, hint)), if it passed one.
FrameOutcome process_frame(packet::FrameBytes frame, const Snapshot& snapshot,
                           std::uint32_t ingress_slot, FrameSinks sinks, FlowAffinity flows = {},
                           IpHop hop = {}, packet::MatchHint hint = {}) noexcept;

}  // namespace ferry::fastpath
