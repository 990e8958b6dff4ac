// Resolving a next hop a worker missed, and classifying holds that ran out.
#include "lib/fastpath/next_hop_resolution.hh"

#include <linux/neighbour.h>

#include "lib/fastpath/rtnetlink.hh"

namespace ferry::fastpath {

KernelEntry kernel_entry_of(std::optional<std::uint16_t> nud_state) {
  if (!nud_state || *nud_state == NUD_NONE) return KernelEntry::absent;
  if (*nud_state & NUD_INCOMPLETE) return KernelEntry::incomplete;
  if (*nud_state & NUD_FAILED) return KernelEntry::failed;
  if (*nud_state & NUD_STALE) return KernelEntry::stale;
  return has_usable_mac(*nud_state) ? KernelEntry::usable : KernelEntry::absent;
}

ResolveAction ResolutionTracker::on_miss(const NeighbourKey& key, KernelEntry entry,
                                         Clock::time_point now) {
  switch (entry) {
    case KernelEntry::usable:
      return ResolveAction::publish;
    case KernelEntry::stale:
      return ResolveAction::publish_and_confirm;
    case KernelEntry::absent:
    case KernelEntry::failed:
      // NTF_USE solicits at once from here; the kernel itself then retransmits every
      // retrans_time until it answers or fails.
      solicited(key, now);
      return ResolveAction::solicit;
    case KernelEntry::incomplete:
      break;
  }
  // INCOMPLETE. If ferry solicited it within the last kSolicitEvery and no hold ran out since, the
  // answer is due (or the kernel's next retransmit is); otherwise the kernel's own resolution may
  // have its next solicitation up to retrans_time away (or none at all, for an entry written
  // INCOMPLETE by hand), longer than a held frame waits: start it over so that it solicits now.
  auto it = solicited_.find(key);
  if (it != solicited_.end() && !it->second.timed_out && now - it->second.at < kSolicitEvery) {
    return ResolveAction::wait;
  }
  solicited(key, now);
  return ResolveAction::restart;
}

Unreleased ResolutionTracker::on_timeout(const NeighbourKey& key, KernelEntry entry,
                                         bool in_tables) {
  if (in_tables) return Unreleased::late;  // resolved since: nothing to start afresh
  auto [it, added] = solicited_.try_emplace(key);
  it->second.timed_out = true;
  switch (entry) {
    case KernelEntry::usable:
    case KernelEntry::stale:
      return Unreleased::unpublished;
    case KernelEntry::failed:
      return Unreleased::failed;
    case KernelEntry::absent:
    case KernelEntry::incomplete:
      break;
  }
  return Unreleased::no_answer;
}

void ResolutionTracker::solicited(const NeighbourKey& key, Clock::time_point now) {
  solicited_[key] = Record{now, false};
  if (solicited_.size() > kMaxTracked) {  // forget old ones rather than grow without bound
    std::erase_if(solicited_, [now](const auto& e) { return now - e.second.at >= kSolicitEvery; });
  }
}

}  // namespace ferry::fastpath
