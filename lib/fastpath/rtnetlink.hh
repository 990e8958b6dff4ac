// The few rtnetlink messages the fast path needs: link, route and neighbour dumps and
// notifications (parsed into plain structs, no socket needed, so they are unit-tested on bytes),
// and the RTM_NEWNEIGH + NTF_USE request that makes the kernel resolve a next hop. Control thread
// only.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "lib/packet/bytes.hh"

namespace ferry::fastpath {

struct NeighbourMessage {
  bool deleted = false;  // RTM_DELNEIGH
  int ifindex = 0;
  net::IpAddress address;
  std::optional<packet::MacAddress> mac;
  std::uint16_t state = 0;  // NUD_*
};

struct RouteMessage {
  bool deleted = false;  // RTM_DELROUTE
  int oif = 0;           // first next hop's interface for multipath routes
  net::Prefix prefix;
  std::optional<net::IpAddress> gateway;
  std::uint32_t metric = 0;
  std::uint32_t table = 0;
  std::uint8_t type = 0;      // RTN_*
  std::uint8_t protocol = 0;  // RTPROT_*: who installed it
  std::uint32_t flags = 0;    // RTM_F_*
};

struct LinkMessage {
  bool deleted = false;  // RTM_DELLINK
  int ifindex = 0;
  std::string name;         // IFLA_IFNAME
  std::uint32_t flags = 0;  // IFF_*
};

// nullopt for messages of another type, family or a shape the fast path cannot use.
std::optional<LinkMessage> parse_link(const nlmsghdr* message);
std::optional<NeighbourMessage> parse_neighbour(const nlmsghdr* message);
std::optional<RouteMessage> parse_route(const nlmsghdr* message);

// A unicast route of the main table: what the workers may forward along.
bool is_forwarding_route(const RouteMessage& route);
// NUD states whose link-layer address may be used to send (the kernel would send to it too).
bool has_usable_mac(std::uint16_t nud_state);
// "REACHABLE", "STALE", ... as `ip neigh` prints them (the lowest state bit set; "NONE" for 0).
const char* nud_state_name(std::uint16_t nud_state);

// Appends one rtattr (header, `size` bytes of `data`, padding) to a request being built in `buf`.
void append_attribute(std::vector<std::uint8_t>& buf, std::uint16_t type, const void* data,
                      std::size_t size);

// RTM_NEWNEIGH with NTF_USE (NLM_F_CREATE | NLM_F_REPLACE, state NUD_NONE): creates the entry if
// needed and runs the kernel's neighbour state machine as if a packet had been sent to it, so an
// unknown (or FAILED) next hop gets an ARP request / neighbour solicitation at once and a STALE one
// goes to DELAY, then PROBE. An INCOMPLETE entry is left as it is: its next solicitation is due
// at its own retransmit timer (retrans_time, 1 s), and an entry written INCOMPLETE by hand has
// none.
std::vector<std::uint8_t> resolve_request(int ifindex, const net::IpAddress& address,
                                          std::uint32_t sequence);
// Starts an INCOMPLETE entry's resolution over, so that it solicits now: RTM_NEWNEIGH setting it
// FAILED (an administrative update of an existing entry: no NLM_F_CREATE), then resolve_request(),
// both in one buffer (the kernel handles them in order). Packets the kernel itself had queued on
// the entry are dropped with the FAILED, as they would be when its own probes ran out.
std::vector<std::uint8_t> restart_request(int ifindex, const net::IpAddress& address,
                                          std::uint32_t sequence);
// RTM_GETNEIGH for one entry (no dump): the kernel answers with the entry as RTM_NEWNEIGH, or
// ENOENT.
std::vector<std::uint8_t> neighbour_query(int ifindex, const net::IpAddress& address,
                                          std::uint32_t sequence);

// One NETLINK_ROUTE socket. Throws std::system_error on setup failures.
class RtnetlinkSocket {
 public:
  // `groups`: RTMGRP_* bits to subscribe to (0 for a request socket).
  explicit RtnetlinkSocket(std::uint32_t groups = 0);

  int fd() const { return fd_.get(); }
  // A close-on-exec duplicate of fd() for an asio descriptor to wait on (it closes its copy).
  // Throws std::system_error.
  int duplicate_fd() const;

  // Sends a dump request (RTM_GETROUTE / RTM_GETNEIGH for `family`) and calls `visit` on every
  // message of the answer. Blocking; a dump of a gateway's tables takes microseconds.
  void dump(std::uint16_t type, std::uint8_t family,
            const std::function<void(const nlmsghdr*)>& visit);
  // Non-blocking: reads every queued datagram and calls `visit` on each message. Returns false
  // when the kernel dropped notifications (ENOBUFS): the caller must re-dump.
  bool drain(const std::function<void(const nlmsghdr*)>& visit);
  // Non-blocking send of one request; false (errno set) when the kernel refused it.
  bool send(std::span<const std::uint8_t> request);
  // Sends one request (its sequence number and NLM_F_ACK are set here; a buffer of several
  // requests gets one sequence number for all) and waits for the kernel's answer: 0 when it was
  // applied, else the errno the first failing message failed with. `visit` (if any) is called on
  // the messages of the answer before the acknowledgement (a query's entry). Throws
  // std::system_error when the socket itself fails or no answer comes within 5 s.
  int transact(std::span<std::uint8_t> request,
               const std::function<void(const nlmsghdr*)>& visit = nullptr);

 private:
  void await_answer(std::uint32_t sequence, const char* what,
                    const std::function<bool(const nlmsghdr*)>& take);
  UniqueFd fd_;
  std::uint32_t sequence_ = 1;
};

// Calls `visit` on each complete message in a datagram.
void for_each_message(std::span<const std::uint8_t> datagram,
                      const std::function<void(const nlmsghdr*)>& visit);

}  // namespace ferry::fastpath
