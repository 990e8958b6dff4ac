// Direct server return in the fast path: a request of an encapsulating service (forwarding ipip or
// gue) goes, unchanged but for its hop limit, inside a new outer header to the backend chosen as
// for any balanced request (QUIC-LB, flow table, Maglev); the backend decapsulates it and answers
// the client itself, so no reply crosses the gateway. Internal to lib/fastpath.
#pragma once

#include <cstdint>
#include <optional>

#include "lib/fastpath/encap_target.hh"
#include "lib/fastpath/frame_processor.hh"
#include "lib/packet/checksum.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/service_table.hh"

namespace ferry::fastpath {

// Encapsulates request `p` (UDP or TCP, matched to `service`, which encapsulates) in `frame`:
// the frame grows at its front by the outer header (FrameOutcome::front; `hop.headroom` bytes are
// free before it) and loses any Ethernet padding (FrameOutcome::length). The inner packet keeps
// its bytes but for its hop limit (decremented: the gateway is a hop; at 1 the client gets time
// exceeded) and a checksum left partial by its sender (`checksum`), finished first. Too big for
// the egress link once encapsulated: fragmentation needed / packet too big to the client with the
// MTU less the outer header, never a silent drop. No allocation, lock, syscall or exception.
// `sent_to`, if given, is set to where the packet went once it is encapsulated (the fragment
// table keeps it for the datagram's later fragments); left as it is otherwise.
FrameOutcome encapsulate(packet::FrameBytes frame, packet::ParsedPacket& p,
                         const packet::Service& service, packet::L4Checksum checksum,
                         const Snapshot& s, FrameSinks sinks, FlowAffinity flows, const IpHop& hop,
                         std::optional<EncapTarget>* sent_to = nullptr) noexcept;

// ... to the service's backend `backend` (an index into service.backends, or kNoBackend: dropped
// as no_backend), chosen by the caller: an ICMP error about a reply a backend sent the client
// directly goes to that backend as it came (its path MTU, its unreachable port); an error too big
// for the tunnel is dropped as too_big, never answered with another.
FrameOutcome encapsulate_to(packet::FrameBytes frame, packet::ParsedPacket& p,
                            const packet::Service& service, std::uint16_t backend,
                            packet::L4Checksum checksum, const Snapshot& s, FrameSinks sinks,
                            const IpHop& hop,
                            std::optional<EncapTarget>* sent_to = nullptr) noexcept;

// Where `service`'s backend `backend` (a valid index) gets packet `p`: its tunnel, address and
// counter slot, and p's flow hash for the outer header.
EncapTarget target_of(const packet::Service& service, std::uint16_t backend,
                      const packet::ParsedPacket& p, const ConfigTables& tables) noexcept;

// The encapsulation itself, to `target`: what encapsulate_to() does once the backend is known,
// without the hop limit's check (the caller's). Too big for the tunnel: an IPv4 packet without DF
// is left for the worker to cut (*hop.tunnel_cut, FrameOutcome::fragment_mtu) when the worker
// passed a tunnel_cut and it needs at most packet::kMaxFragmentPieces pieces;
// anything else is answered as steps::answer_with_error() allows (never about a fragment but the
// first, nor an ICMP error).
FrameOutcome encapsulate_as(packet::FrameBytes frame, packet::ParsedPacket& p,
                            const EncapTarget& target, packet::L4Checksum checksum,
                            const Snapshot& s, FrameSinks sinks, const IpHop& hop,
                            std::optional<EncapTarget>* sent_to = nullptr) noexcept;

// One piece of a packet encapsulate_as() asked to cut (p: the piece, an IPv4 fragment whose
// checksum and hop limit the whole packet had settled already), to `target`. A piece too big
// for the tunnel all the same is dropped as too_big.
FrameOutcome encapsulate_piece(packet::FrameBytes frame, packet::ParsedPacket& p,
                               const EncapTarget& target, const Snapshot& s, FrameSinks sinks,
                               const IpHop& hop) noexcept;

}  // namespace ferry::fastpath
