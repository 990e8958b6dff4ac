// What the control thread does when a worker reports a next hop without a MAC, and why a hold ran
// out. Pure decisions over the kernel's answer to a neighbour query and ferry's own record of the
// solicitations it caused; NextHopWatch carries them out over rtnetlink.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

#include "lib/fastpath/neighbour_table.hh"
#include "lib/fastpath/worker_counters.hh"

namespace ferry::fastpath {

struct NeighbourKeyLess {
  bool operator()(const NeighbourKey& a, const NeighbourKey& b) const {
    if (a.port != b.port) return a.port < b.port;
    if (a.version != b.version) return a.version < b.version;
    return a.address < b.address;
  }
};

// The kernel's entry for a next hop, as far as resolving it goes.
enum class KernelEntry : std::uint8_t {
  absent,      // no entry (or NUD_NONE)
  incomplete,  // being resolved: solicited, no answer yet
  failed,      // its solicitations went unanswered
  stale,       // a MAC nobody has confirmed (learnt from the neighbour's own ARP request / NS)
  usable,      // REACHABLE, DELAY, PROBE, PERMANENT, NOARP: a MAC the kernel itself sends to
};
// nullopt: the kernel has no entry (ENOENT).
KernelEntry kernel_entry_of(std::optional<std::uint16_t> nud_state);

enum class ResolveAction : std::uint8_t {
  publish,              // the kernel has a MAC ferry's tables lack: take it and publish it now
  publish_and_confirm,  // ... it is STALE: also have the kernel confirm it (NTF_USE: DELAY, PROBE)
  solicit,              // NTF_USE: the kernel creates the entry (or leaves FAILED) and solicits now
  restart,              // INCOMPLETE: set it FAILED, then NTF_USE, so that it solicits now
  wait,                 // INCOMPLETE after ferry's own solicitation: its answer is due
};

// Ferry's record of the solicitations it caused, per next hop: a next hop is solicited when a
// worker first needs it, at most once per kSolicitEvery after that while the kernel keeps it
// INCOMPLETE, and at once again after a hold of it ran out (a fresh resolution: a held frame that
// was never released must not leave its next hop waiting on a solicitation that went unanswered).
class ResolutionTracker {
 public:
  using Clock = std::chrono::steady_clock;
  // As the kernel's own retransmits (retrans_time): no faster for a next hop that does not answer.
  static constexpr std::chrono::milliseconds kSolicitEvery{1000};
  static constexpr std::size_t kMaxTracked = 4096;

  // A worker has frames for `key` and no MAC; the kernel's entry is `entry`. Records a
  // solicitation when the action makes one.
  ResolveAction on_miss(const NeighbourKey& key, KernelEntry entry, Clock::time_point now);
  // A worker's hold of `key` ran out; the kernel's entry is `entry` now, and `in_tables` says
  // whether ferry's tables have a MAC for it by now. The next miss solicits whatever the kernel's
  // state.
  Unreleased on_timeout(const NeighbourKey& key, KernelEntry entry, bool in_tables);
  // The next hop has a usable MAC in ferry's tables: nothing more to track.
  void resolved(const NeighbourKey& key) { solicited_.erase(key); }
  std::size_t tracked() const { return solicited_.size(); }

 private:
  struct Record {
    Clock::time_point at{};  // when ferry last made the kernel solicit it
    bool timed_out = false;  // a hold ran out since
  };
  void solicited(const NeighbourKey& key, Clock::time_point now);
  std::map<NeighbourKey, Record, NeighbourKeyLess> solicited_;
};

}  // namespace ferry::fastpath
