// The reflect action: send a packet straight back where it came from (health checks, tests).
#pragma once

#include <cstdint>

#include "lib/packet/bytes.hh"
#include "lib/packet/fate.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

// Swaps the Ethernet, IP and UDP/TCP source and destination and forwards out of `ingress_port`.
// No checksum changes: the ones'-complement sums (IPv4 header and L4 pseudo-header) do not depend
// on the order of the swapped words. TTL and VLAN tags are left as they are. A fragment after the
// first (p.fragment_tail) has no ports: only its Ethernet and IP addresses are swapped.
Verdict reflect(FrameBytes frame, ParsedPacket& p, std::uint32_t ingress_port) noexcept;

}  // namespace ferry::packet
