// The fast path's interfaces as the kernel's link messages describe them: lost, or back.
#include "lib/fastpath/link_tracker.hh"

#include <net/if.h>

#include <algorithm>

namespace ferry::fastpath {

void LinkTracker::follow(const std::vector<std::pair<std::string, int>>& bound) {
  links_.clear();
  for (const auto& [name, ifindex] : bound) links_.push_back({name, ifindex, false});
}

std::optional<LinkEvent> LinkTracker::handle(const LinkMessage& message) {
  for (FollowedLink& link : links_) {
    if (link.gone || link.ifindex != message.ifindex) continue;
    if (message.deleted) {
      link.gone = true;
      return LinkEvent{LinkEvent::Kind::lost, link.name, link.ifindex, 0, {}};
    }
    if (message.name != link.name) {
      link.gone = true;
      return LinkEvent{LinkEvent::Kind::lost, link.name, link.ifindex, 0, message.name};
    }
  }
  if (message.deleted || (message.flags & IFF_UP) == 0) return std::nullopt;
  for (FollowedLink& link : links_) {
    if (link.name != message.name) continue;
    if (!link.gone && link.ifindex == message.ifindex) return std::nullopt;
    LinkEvent event{LinkEvent::Kind::returned, link.name, link.ifindex, message.ifindex, {}};
    link.gone = false;
    link.ifindex = message.ifindex;
    return event;
  }
  return std::nullopt;
}

std::vector<LinkEvent> LinkTracker::reconcile(const std::vector<LinkMessage>& present) {
  std::vector<LinkEvent> events;
  for (FollowedLink& link : links_) {
    if (link.gone) continue;
    bool exists = std::any_of(present.begin(), present.end(), [&](const LinkMessage& m) {
      return m.ifindex == link.ifindex && m.name == link.name;
    });
    if (exists) continue;
    // Renamed links are found by handle() below; this one is not there at all.
    bool renamed = std::any_of(present.begin(), present.end(),
                               [&](const LinkMessage& m) { return m.ifindex == link.ifindex; });
    if (!renamed) {
      link.gone = true;
      events.push_back({LinkEvent::Kind::lost, link.name, link.ifindex, 0, {}});
    }
  }
  for (const LinkMessage& m : present) {
    if (auto event = handle(m)) events.push_back(*event);
  }
  return events;
}

bool LinkTracker::follows(int ifindex) const {
  for (const FollowedLink& l : links_) {
    if (l.ifindex == ifindex && !l.gone) return true;
  }
  return false;
}

}  // namespace ferry::fastpath
