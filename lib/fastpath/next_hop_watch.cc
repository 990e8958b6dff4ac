// Following the kernel's routes and neighbours on the fast path's interfaces.
#include "lib/fastpath/next_hop_watch.hh"

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "lib/common/log.hh"

namespace ferry::fastpath {
namespace {

// Long enough to gather a burst (a link flap, an ARP storm), short next to ARP resolution.
constexpr auto kCoalesce = std::chrono::milliseconds(10);

packet::IpVersion version_of(const net::IpAddress& a) {
  return a.is_v4() ? packet::IpVersion::v4 : packet::IpVersion::v6;
}

}  // namespace

NextHopWatch::NextHopWatch(boost::asio::io_context& io, const FastpathLayout& layout,
                           Publish publish)
    : layout_(layout),
      publish_(std::move(publish)),
      events_(RTMGRP_NEIGH | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE),
      events_wait_(io, events_.duplicate_fd()),
      rebuild_timer_(io) {
  dump_routes();
  dump_neighbours();
  tables_ = build();
  first_mac_ = false;  // the dump's MACs are in the first tables
}

NextHopWatch::~NextHopWatch() {
  *alive_ = false;
  boost::system::error_code ignored;
  rebuild_timer_.cancel();
  events_wait_.cancel(ignored);
  events_wait_.close(ignored);
}

void NextHopWatch::start() {
  arm_read();
}

void NextHopWatch::dump_routes() {
  routes_.clear();
  for (std::uint8_t family : {AF_INET, AF_INET6}) {
    requests_.dump(RTM_GETROUTE, family, [this](const nlmsghdr* h) {
      auto r = parse_route(h);
      if (!r || !is_forwarding_route(*r)) return;
      const PortSpec* port = layout_.port_by_ifindex(r->oif);
      if (!port) return;
      routes_.push_back({r->prefix, port->slot, r->gateway, r->metric});
    });
  }
  routes_dirty_ = false;
}

void NextHopWatch::dump_neighbours() {
  neighbours_.clear();
  for (std::uint8_t family : {AF_INET, AF_INET6}) {
    requests_.dump(RTM_GETNEIGH, family, [this](const nlmsghdr* h) { handle(h); });
  }
}

void NextHopWatch::handle(const nlmsghdr* message) {
  if (message->nlmsg_type == RTM_NEWROUTE || message->nlmsg_type == RTM_DELROUTE) {
    auto r = parse_route(message);
    // Only routes of our ports matter; re-dumping is simpler than patching, and rare.
    if (r && r->table == RT_TABLE_MAIN && layout_.port_by_ifindex(r->oif)) routes_dirty_ = true;
    return;
  }
  auto n = parse_neighbour(message);
  if (!n) return;
  const PortSpec* port = layout_.port_by_ifindex(n->ifindex);
  if (!port) return;
  NeighbourKey key{port->slot, version_of(n->address), n->address.bytes};
  if (n->deleted || !n->mac || !has_usable_mac(n->state)) {
    neighbours_.erase(key);
  } else {
    auto [it, added] = neighbours_.insert_or_assign(key, NeighbourState{*n->mac, n->state});
    first_mac_ |= added;
    tracker_.resolved(key);
  }
}

std::shared_ptr<const NextHopTables> NextHopWatch::build() const {
  std::vector<Neighbour> list;
  list.reserve(neighbours_.size());
  for (const auto& [key, state] : neighbours_) list.push_back({key, state.mac});
  return std::make_shared<const NextHopTables>(
      NextHopTables{KernelRouteTable(routes_), NeighbourTable(list)});
}

void NextHopWatch::arm_read() {
  events_wait_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          [this, alive = alive_](const boost::system::error_code& ec) {
                            if (ec || !*alive) return;
                            on_readable();
                            arm_read();
                          });
}

void NextHopWatch::on_readable() {
  bool complete = events_.drain([this](const nlmsghdr* h) {
    ++stats_.notifications;
    handle(h);
  });
  if (!complete) {
    // Notifications were lost: the model may be wrong, so start over from a dump.
    ++stats_.resyncs;
    log::warning("fast path: netlink notifications overran; re-reading routes and neighbours");
    try {
      dump_neighbours();
      routes_dirty_ = true;
    } catch (const std::exception& e) {
      log::error("fast path: re-reading neighbours failed: {}", e.what());
    }
  }
  if (first_mac_) {
    // Frames may be held for this next hop: no coalescing delay (the drain above took the whole
    // burst already). A pending coalesced rebuild is folded into this one.
    if (rebuild_pending_) rebuild_timer_.cancel();
    rebuild();
  } else {
    schedule_rebuild();
  }
}

void NextHopWatch::schedule_rebuild() {
  if (rebuild_pending_) return;
  rebuild_pending_ = true;
  rebuild_timer_.expires_after(kCoalesce);
  rebuild_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    rebuild();
  });
}

void NextHopWatch::rebuild() {
  rebuild_pending_ = false;
  first_mac_ = false;
  if (routes_dirty_) {
    try {
      dump_routes();
    } catch (const std::exception& e) {
      log::error("fast path: re-reading routes failed, keeping the old ones: {}", e.what());
    }
  }
  tables_ = build();
  ++stats_.rebuilds;
  publish_(tables_);
}

net::IpAddress NextHopWatch::address_of(const NeighbourKey& key) {
  return {key.version == packet::IpVersion::v4 ? AF_INET : AF_INET6, key.address};
}

NextHopWatch::KernelAnswer NextHopWatch::query(const NeighbourKey& key) {
  auto request = neighbour_query(layout_.ports[key.port].ifindex, address_of(key), 0);
  KernelAnswer answer;
  int err = requests_.transact(request, [&](const nlmsghdr* h) {
    if (auto n = parse_neighbour(h); n && !n->deleted) answer.entry = *n;
  });
  ++stats_.queries;
  answer.ok = err == 0 || err == ENOENT;
  if (err == ENOENT) answer.entry.reset();
  return answer;
}

bool NextHopWatch::send(std::vector<std::uint8_t> request) {
  if (requests_.transact(request) == 0) return true;
  ++stats_.resolution_errors;
  return false;
}

void NextHopWatch::adopt(const NeighbourKey& key, const NeighbourMessage& entry) {
  if (!entry.mac || !has_usable_mac(entry.state)) return;
  neighbours_.insert_or_assign(key, NeighbourState{*entry.mac, entry.state});
  tracker_.resolved(key);
  ++stats_.adopted;
  // A worker holds frames for it: publish now (a coalesced rebuild pending is folded in).
  if (rebuild_pending_) rebuild_timer_.cancel();
  rebuild();
}

void NextHopWatch::request_resolution(const NeighbourKey& key,
                                      std::chrono::steady_clock::time_point now) {
  if (key.port >= layout_.ports.size()) return;
  // Ferry has its MAC already: the worker's tables were a generation behind, and the ones it
  // takes up next have it.
  if (neighbours_.contains(key)) return;
  const PortSpec& port = layout_.ports[key.port];
  net::IpAddress address = address_of(key);
  try {
    // What the kernel has now, not what its notifications said: an entry ferry's model lacks
    // (a notification not read yet, or lost) is taken from here; NTF_USE would not bring it, as
    // the kernel notifies nothing for an entry that already has a MAC.
    KernelAnswer answer = query(key);
    if (!answer.ok) {
      ++stats_.resolution_errors;
      if (send(resolve_request(port.ifindex, address, 0))) ++stats_.resolutions_sent;
      return;
    }
    auto state = answer.entry ? std::optional<std::uint16_t>(answer.entry->state) : std::nullopt;
    switch (tracker_.on_miss(key, kernel_entry_of(state), now)) {
      case ResolveAction::publish:
        log::debug("fast path: {} on {} has a MAC in the kernel ferry had not taken; taking it",
                   address.to_string(), port.ifname);
        adopt(key, *answer.entry);
        break;
      case ResolveAction::publish_and_confirm:
        log::debug("fast path: {} on {} is STALE in the kernel; taking its MAC, confirming it",
                   address.to_string(), port.ifname);
        adopt(key, *answer.entry);
        if (send(resolve_request(port.ifindex, address, 0))) ++stats_.stale_refreshes;
        break;
      case ResolveAction::solicit:
        if (send(resolve_request(port.ifindex, address, 0))) {
          ++stats_.resolutions_sent;
          log::debug("fast path: resolving {} on {}", address.to_string(), port.ifname);
        }
        break;
      case ResolveAction::restart:
        if (send(restart_request(port.ifindex, address, 0))) {
          ++stats_.restarts;
          log::debug("fast path: resolving {} on {} over (it was INCOMPLETE)", address.to_string(),
                     port.ifname);
        }
        break;
      case ResolveAction::wait:
        break;
    }
  } catch (const std::exception& e) {
    ++stats_.resolution_errors;
    log::warning("fast path: resolving {} on {}: {}", address.to_string(), port.ifname, e.what());
  }
}

Unreleased NextHopWatch::hold_timed_out(const NeighbourKey& key) {
  if (key.port >= layout_.ports.size()) return Unreleased::no_answer;
  std::optional<NeighbourMessage> entry;
  try {
    KernelAnswer answer = query(key);
    if (answer.ok) entry = answer.entry;
  } catch (const std::exception& e) {
    log::warning("fast path: asking the kernel about {}: {}", address_of(key).to_string(),
                 e.what());
  }
  auto state = entry ? std::optional<std::uint16_t>(entry->state) : std::nullopt;
  Unreleased reason = tracker_.on_timeout(key, kernel_entry_of(state), neighbours_.contains(key));
  log::debug("fast path: frames held for {} on {} ran out of time ({}; the kernel's entry: {})",
             address_of(key).to_string(), layout_.ports[key.port].ifname, to_string(reason),
             entry ? nud_state_name(entry->state) : "none");
  if (reason == Unreleased::unpublished) adopt(key, *entry);
  return reason;
}

void NextHopWatch::refresh_stale() {
  for (const auto& [key, state] : neighbours_) {
    if ((state.state & NUD_STALE) == 0) continue;
    try {
      if (send(resolve_request(layout_.ports[key.port].ifindex, address_of(key), 0))) {
        ++stats_.stale_refreshes;
      }
    } catch (const std::exception& e) {
      ++stats_.resolution_errors;
      log::warning("fast path: confirming {}: {}", address_of(key).to_string(), e.what());
      return;
    }
  }
}

}  // namespace ferry::fastpath
