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
constexpr auto kResolveAgainAfter = std::chrono::seconds(1);

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

void NextHopWatch::drain_request_errors() {
  requests_.drain([this](const nlmsghdr* h) {
    if (h->nlmsg_type == NLMSG_ERROR && static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error != 0) {
      ++stats_.resolution_errors;
    }
  });
}

void NextHopWatch::request_resolution(const NeighbourKey& key,
                                      std::chrono::steady_clock::time_point now) {
  if (key.port >= layout_.ports.size()) return;
  auto [it, inserted] = requested_.try_emplace(key, now);
  if (!inserted) {
    if (now - it->second < kResolveAgainAfter) return;
    it->second = now;
  }
  if (requested_.size() > 4096) {  // forget old requests rather than grow without bound
    std::erase_if(requested_,
                  [now](const auto& e) { return now - e.second >= kResolveAgainAfter; });
  }
  net::IpAddress address{key.version == packet::IpVersion::v4 ? AF_INET : AF_INET6, key.address};
  auto request = resolve_request(layout_.ports[key.port].ifindex, address, ++sequence_);
  drain_request_errors();
  if (requests_.send(request)) {
    ++stats_.resolutions_sent;
    log::debug("fast path: resolving {} on {}", address.to_string(),
               layout_.ports[key.port].ifname);
  } else {
    ++stats_.resolution_errors;
  }
}

void NextHopWatch::refresh_stale() {
  drain_request_errors();
  for (const auto& [key, state] : neighbours_) {
    if ((state.state & NUD_STALE) == 0) continue;
    net::IpAddress address{key.version == packet::IpVersion::v4 ? AF_INET : AF_INET6, key.address};
    if (requests_.send(resolve_request(layout_.ports[key.port].ifindex, address, ++sequence_))) {
      ++stats_.stale_refreshes;
    }
  }
}

}  // namespace ferry::fastpath
