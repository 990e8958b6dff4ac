// Noticing a fast-path interface deleted, renamed away or re-created while ferryd runs.
#include "lib/fastpath/link_watch.hh"

#include <linux/rtnetlink.h>

#include <cerrno>
#include <system_error>

#include "lib/common/log.hh"

namespace ferry::fastpath {
namespace {

constexpr const char* kLossesHelp =
    "Times a fast-path interface was deleted (or renamed away) while ferryd ran.";

}  // namespace

LinkWatch::LinkWatch(boost::asio::io_context& io, metrics::Registry& registry, Returned returned,
                     Changed changed)
    : returned_(std::move(returned)),
      changed_(std::move(changed)),
      events_(RTMGRP_LINK),
      events_wait_(io, events_.duplicate_fd()) {
  arm_read();
  metrics_ = registry.add([this](metrics::SnapshotBuilder& out) { collect(out); });
}

LinkWatch::~LinkWatch() {
  metrics_.reset();
  *alive_ = false;
  boost::system::error_code ignored;
  events_wait_.cancel(ignored);
  events_wait_.close(ignored);
}

void LinkWatch::follow(const std::vector<std::pair<std::string, int>>& bound) {
  tracker_.follow(bound);
  // Interfaces no longer configured stop being exported; the rest keep counting.
  std::map<std::string, std::uint64_t> losses;
  for (const auto& [name, ifindex] : bound) losses[name] = losses_[name];
  losses_ = std::move(losses);
  resync();
}

void LinkWatch::resync() {
  std::vector<LinkMessage> present;
  try {
    requests_.dump(RTM_GETLINK, AF_UNSPEC, [&present](const nlmsghdr* h) {
      if (auto link = parse_link(h)) present.push_back(std::move(*link));
    });
  } catch (const std::exception& e) {
    log::error(
        "fast path: reading the interfaces failed, deletions may go unnoticed until the "
        "next change: {}",
        e.what());
    return;
  }
  for (const LinkEvent& event : tracker_.reconcile(present)) act(event);
}

void LinkWatch::arm_read() {
  events_wait_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          [this, alive = alive_](const boost::system::error_code& ec) {
                            if (ec || !*alive) return;
                            on_readable();
                            if (*alive) arm_read();
                          });
}

void LinkWatch::on_readable() {
  std::vector<LinkMessage> messages;
  bool complete = events_.drain([&messages](const nlmsghdr* h) {
    if (auto link = parse_link(h)) messages.push_back(std::move(*link));
  });
  bool followed_changed = false;
  for (const LinkMessage& m : messages) {
    if (auto event = tracker_.handle(m)) {
      act(*event);
    } else {
      followed_changed |= tracker_.follows(m.ifindex);
    }
  }
  if (followed_changed && changed_) changed_();
  // Notifications were lost: what the kernel has now is the truth.
  if (!complete) resync();
}

void LinkWatch::act(const LinkEvent& event) {
  if (event.kind == LinkEvent::Kind::lost) {
    ++losses_[event.name];
    log::warning(
        "{}: interface {} (ifindex {}): XDP steering and the AF_XDP sockets of this port "
        "stop; they are bound again when an interface named {} is up",
        event.name,
        event.renamed_to.empty() ? std::string("deleted") : "renamed to " + event.renamed_to,
        event.old_ifindex, event.name);
    return;
  }
  log::notice(
      "{}: interface is back (ifindex {}, was {}): attaching XDP and binding its AF_XDP "
      "sockets again",
      event.name, event.new_ifindex, event.old_ifindex);
  returned_(event);
}

void LinkWatch::collect(metrics::SnapshotBuilder& out) const {
  out.declare("ferry_xdp_link_losses_total", kLossesHelp, metrics::Type::counter);
  for (const auto& [name, count] : losses_) {
    out.counter("ferry_xdp_link_losses_total", kLossesHelp, {{"iface", name}},
                static_cast<double>(count));
  }
}

}  // namespace ferry::fastpath
