// Which of the fast path's interfaces are gone and which came back, decided from the kernel's
// link messages alone (no socket), so LinkWatch's decisions are unit-tested on messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/fastpath/rtnetlink.hh"

namespace ferry::fastpath {

struct FollowedLink {
  std::string name;
  int ifindex = 0;    // the ifindex the data plane is bound to, or the last one seen up
  bool gone = false;  // deleted or renamed away since; nothing steers to it
};

struct LinkEvent {
  enum class Kind { lost, returned };
  Kind kind = Kind::lost;
  std::string name;        // the configured name
  int old_ifindex = 0;     // lost: the ifindex that went; returned: the one bound before
  int new_ifindex = 0;     // returned: the ifindex that is up now
  std::string renamed_to;  // lost by a rename: the interface's new name
};

class LinkTracker {
 public:
  // The interfaces the data plane serves now and the ifindex each is bound to: none is gone.
  void follow(const std::vector<std::pair<std::string, int>>& bound);
  // One RTM_NEWLINK / RTM_DELLINK. Lost: the bound ifindex was deleted or renamed. Returned: an
  // interface with a followed name is up under an ifindex other than the bound one (re-created),
  // or up again after it was lost. Each transition is reported once.
  std::optional<LinkEvent> handle(const LinkMessage& message);
  // The links that exist now (a dump): followed names absent from it are lost, and the present
  // ones are handled as if announced, so nothing missed between binding and following stays
  // unnoticed (nor is anything reported twice).
  std::vector<LinkEvent> reconcile(const std::vector<LinkMessage>& present);

  const std::vector<FollowedLink>& links() const { return links_; }
  // True when `ifindex` is the bound ifindex of a followed interface that is not gone.
  bool follows(int ifindex) const;

 private:
  std::vector<FollowedLink> links_;
};

}  // namespace ferry::fastpath
