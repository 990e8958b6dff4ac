// A worker's counters: written by that worker only (metrics::Counter, relaxed load + store),
// read by the control thread's collector. Cache-line aligned so workers never share a line.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "bpf/ferry_shared.h"
#include "lib/metrics/registry.hh"
#include "lib/packet/fate.hh"
#include "lib/quic/lb_config.hh"
#include "lib/quic/quic_lb_service.hh"
#include "lib/xsk/frame_account.hh"

namespace ferry::fastpath {

// Why a worker dropped a frame it received: the fast path's one vocabulary (lib/packet/fate.hh).
using packet::Drop;
using packet::kDropCount;
using packet::to_string;

// Why frames that waited for their next hop's MAC were never sent with it
// (ferry_xsk_neighbour_unreleased_total{reason}). The worker counts the reasons it knows; the
// control thread says which of the first four a hold that ran out was.
enum class Unreleased : std::uint8_t {
  no_answer,     // the hold ran out while the kernel had no MAC (no entry, INCOMPLETE)
  failed,        // ... and the kernel had given the next hop up (FAILED)
  late,          // ... and the MAC came after it (a later solicitation was answered)
  unpublished,   // ... although the kernel had a MAC ferry's tables lacked: they lagged behind
  hold_full,     // no room to hold it (per next hop, per worker, or next hops waiting)
  stopped,       // held when the worker stopped (a re-bind, shutdown)
  unclassified,  // the hold ran out and the report of it found the control thread's queue full
};
inline constexpr std::size_t kUnreleasedCount =
    static_cast<std::size_t>(Unreleased::unclassified) + 1;
std::string_view to_string(Unreleased reason);

// The outer headers of direct server return: IPIP or GUE, over IPv4 or IPv6
// (ferry_xsk_encapsulated_*_total{encap}).
enum class EncapPath : std::uint8_t { ipip4, ipip6, gue4, gue6 };
inline constexpr std::size_t kEncapPathCount = 4;
std::string_view to_string(EncapPath path);

// Per (worker, port): traffic in and out of one AF_XDP socket.
struct alignas(64) PortCounters {
  metrics::Counter rx_packets;
  metrics::Counter rx_bytes;
  metrics::Counter tx_packets;
  metrics::Counter tx_bytes;
  metrics::Counter tx_kicks;        // sendto() calls to make the kernel transmit
  metrics::Counter tx_kick_errors;  // ... that failed (link down, device gone)
  metrics::Counter fill_wakeups;    // poll() calls because the fill ring asked for one
};

// The worker's flow affinity table (flow_table.hh).
struct alignas(64) FlowCounters {
  metrics::Gauge entries;       // in use now
  metrics::Counter hits;        // requests sent to the backend their flow's entry names
  metrics::Counter misses;      // requests of flows without an entry (new): Maglev's choice
  metrics::Counter reassigned;  // flows whose backend may no longer keep them: Maglev's choice
  metrics::Counter evictions;   // live entries displaced by a new flow: their bucket was full
  metrics::Counter expiries;    // entries idle for longer than the idle timeout, freed
};

struct alignas(64) WorkerCounters {
  std::array<metrics::Counter, kDropCount> drops;
  metrics::Counter sleeps;                 // poll() sleeps after the idle spin
  metrics::Counter slab_empty;             // refills that found the free stack empty
  metrics::Counter rejected_frames;        // frames the slab refused back (a bug if > 0)
  metrics::Counter resolutions_requested;  // next hops queued for resolution (once each)
  metrics::Counter resolution_queue_full;  // ... lost because the queue was full
  metrics::Counter snapshot_swaps;         // table generations picked up
  metrics::Counter neighbour_held;         // frames held for an unresolved next hop
  metrics::Counter neighbour_released;     // ... sent once its MAC was published
  // Frames that were never sent with a MAC, for the reasons the worker knows itself (hold_full,
  // stopped, unclassified); a hold that ran out is classified by the control thread.
  std::array<metrics::Counter, kUnreleasedCount> unreleased;
  // Balanced or reflected frames the worker matched itself: the XDP program's match did not come
  // with them or did not hold (a reload between the maps and the tables); 0 in steady state.
  metrics::Counter matched_without_hint;
  metrics::Counter checksums_partial;    // L4 checksums finished: arrived CHECKSUM_PARTIAL
  metrics::Counter checksums_ipv6_zero;  // ... computed: UDP over IPv6 arrived with 0
  // The IP hop: fragments, ICMP errors, path MTU (ip_hop.hh).
  metrics::Counter fragments_forwarded;  // fragments translated (or routed) and sent on
  metrics::Counter fragments_held;       // later fragments held for their first
  metrics::Counter fragments_made;       // IPv4 fragments cut from datagrams over the next MTU
  metrics::Counter icmp_translated;      // ICMP errors about balanced datagrams, translated
  metrics::Counter icmp_time_exceeded;   // time exceeded sent for TTL / hop limit expiring here
  metrics::Counter icmp_too_big;         // fragmentation needed / packet too big sent
  metrics::Counter icmp_rate_limited;    // errors not sent: over the ICMP rate limit
  // QUIC-LB (quic_choice.hh): requests of quic_lb services sent to the backend their connection
  // ID names, by the ID's config rotation codepoint; and those the 4-tuple decided, by why (the
  // `routed` slot is not used).
  std::array<metrics::Counter, quic::kConfigIdCount> quic_lb_routed;
  std::array<metrics::Counter, quic::kQuicLbOutcomeCount> quic_lb_fallback;
  // Direct server return (encap_step.hh): requests sent inside an outer header, by EncapPath.
  std::array<metrics::Counter, kEncapPathCount> encapsulated_packets;
  std::array<metrics::Counter, kEncapPathCount> encapsulated_bytes;  // the inner packets' IP bytes
  std::array<PortCounters, FERRY_MAX_INTERFACES> ports;              // by the worker's port index
  FlowCounters flows;
};

// The frame-conservation terms of a worker's slab, published by the worker between batches with
// a sequence lock, so the control thread always reads one consistent set.
class PublishedAccount {
 public:
  void publish(const xsk::FrameAccount& a) noexcept;
  xsk::FrameAccount read() const noexcept;

 private:
  std::atomic<std::uint32_t> sequence_{0};
  std::atomic<std::uint64_t> values_[7] = {};
};

}  // namespace ferry::fastpath
