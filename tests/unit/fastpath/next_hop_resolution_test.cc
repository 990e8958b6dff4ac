// What the control thread does for a next hop a worker missed, in every state the kernel's entry
// can be in, and why a hold that ran out did: ResolutionTracker and kernel_entry_of().
#include "lib/fastpath/next_hop_resolution.hh"

#include <gtest/gtest.h>
#include <linux/neighbour.h>

namespace ferry::fastpath {
namespace {

using Clock = ResolutionTracker::Clock;
using std::chrono::milliseconds;

NeighbourKey key(std::uint8_t last) {
  NeighbourKey k;
  k.address[0] = 10;
  k.address[3] = last;
  return k;
}

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

TEST(KernelEntry, EveryNudStateMapsToWhatResolvingItTakes) {
  EXPECT_EQ(kernel_entry_of(std::nullopt), KernelEntry::absent) << "ENOENT";
  EXPECT_EQ(kernel_entry_of(NUD_NONE), KernelEntry::absent);
  EXPECT_EQ(kernel_entry_of(NUD_INCOMPLETE), KernelEntry::incomplete);
  EXPECT_EQ(kernel_entry_of(NUD_FAILED), KernelEntry::failed);
  EXPECT_EQ(kernel_entry_of(NUD_STALE), KernelEntry::stale);
  for (std::uint16_t s : {NUD_REACHABLE, NUD_DELAY, NUD_PROBE, NUD_PERMANENT, NUD_NOARP}) {
    EXPECT_EQ(kernel_entry_of(s), KernelEntry::usable) << s;
  }
}

TEST(ResolutionTracker, AMacTheKernelHasIsTakenNotAskedFor) {
  // REACHABLE / DELAY / PROBE: NTF_USE would change nothing and the kernel would notify nothing,
  // so a next hop ferry's model lacks (a notification not read yet, or lost) stays unresolved
  // unless its MAC is taken from the query.
  ResolutionTracker t;
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::usable, t0), ResolveAction::publish);
  // STALE (the client's own ARP request / NS made it): usable at once, and confirmed by the
  // kernel, which ferry's frames never make it do.
  EXPECT_EQ(t.on_miss(key(2), KernelEntry::stale, t0), ResolveAction::publish_and_confirm);
  EXPECT_EQ(t.tracked(), 0u) << "nothing solicited";
}

TEST(ResolutionTracker, NoEntryOrFailedIsSolicitedEveryTimeAWorkerAsks) {
  // NTF_USE solicits at once from NONE or FAILED and the kernel retransmits by itself; a FAILED
  // next hop asked for again is what the kernel does for a new packet too.
  ResolutionTracker t;
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::absent, t0), ResolveAction::solicit);
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::failed, t0 + milliseconds(10)), ResolveAction::solicit);
  EXPECT_EQ(t.tracked(), 1u);
}

TEST(ResolutionTracker, IncompleteAfterFerrysOwnSolicitationWaitsForItsAnswer) {
  ResolutionTracker t;
  ASSERT_EQ(t.on_miss(key(1), KernelEntry::absent, t0), ResolveAction::solicit);
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + milliseconds(1)), ResolveAction::wait);
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + milliseconds(999)),
            ResolveAction::wait);
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + ResolutionTracker::kSolicitEvery),
            ResolveAction::restart)
      << "no faster than the kernel's retransmits, but no slower either";
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete,
                      t0 + ResolutionTracker::kSolicitEvery + milliseconds(1)),
            ResolveAction::wait);
}

TEST(ResolutionTracker, IncompleteFerryDidNotSolicitStartsOverAtOnce) {
  // The kernel's own resolution (its first solicitation unanswered, the next one up to
  // retrans_time away), or an entry written INCOMPLETE by hand (no timer, no solicitation ever):
  // either would outlast a held frame.
  ResolutionTracker t;
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0), ResolveAction::restart);
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + milliseconds(5)), ResolveAction::wait);
}

TEST(ResolutionTracker, AfterAHoldRanOutTheNextMissSolicitsAfresh) {
  ResolutionTracker t;
  ASSERT_EQ(t.on_miss(key(1), KernelEntry::absent, t0), ResolveAction::solicit);
  ASSERT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + milliseconds(300)),
            ResolveAction::wait);
  EXPECT_EQ(t.on_timeout(key(1), KernelEntry::incomplete, false), Unreleased::no_answer);
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + milliseconds(400)),
            ResolveAction::restart)
      << "within a second of the last solicitation, but a hold ran out since";
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + milliseconds(401)), ResolveAction::wait)
      << "one fresh start per timeout";
}

TEST(ResolutionTracker, ATimeoutSaysWhyFromTheKernelsEntryAndFerrysTables) {
  ResolutionTracker t;
  EXPECT_EQ(t.on_timeout(key(1), KernelEntry::absent, false), Unreleased::no_answer);
  EXPECT_EQ(t.on_timeout(key(2), KernelEntry::incomplete, false), Unreleased::no_answer);
  EXPECT_EQ(t.on_timeout(key(3), KernelEntry::failed, false), Unreleased::failed);
  EXPECT_EQ(t.on_timeout(key(4), KernelEntry::stale, false), Unreleased::unpublished)
      << "the kernel had a MAC ferry's tables lacked: the race of issue 23";
  EXPECT_EQ(t.on_timeout(key(5), KernelEntry::usable, false), Unreleased::unpublished);
  EXPECT_EQ(t.on_timeout(key(6), KernelEntry::usable, true), Unreleased::late)
      << "ferry has it by now: it came after the hold ran out";
}

TEST(ResolutionTracker, AResolvedNextHopIsForgotten) {
  ResolutionTracker t;
  ASSERT_EQ(t.on_miss(key(1), KernelEntry::absent, t0), ResolveAction::solicit);
  t.resolved(key(1));
  EXPECT_EQ(t.tracked(), 0u);
  EXPECT_EQ(t.on_miss(key(1), KernelEntry::incomplete, t0 + milliseconds(1)),
            ResolveAction::restart)
      << "INCOMPLETE again later (it failed and was re-created) is not ferry's solicitation";
}

TEST(ResolutionTracker, StaysBoundedByForgettingOldSolicitations) {
  ResolutionTracker t;
  for (std::uint32_t i = 0; i <= ResolutionTracker::kMaxTracked; ++i) {
    NeighbourKey k = key(0);
    k.address[1] = static_cast<std::uint8_t>(i >> 8);
    k.address[2] = static_cast<std::uint8_t>(i);
    auto at = i == ResolutionTracker::kMaxTracked ? t0 + ResolutionTracker::kSolicitEvery : t0;
    t.on_miss(k, KernelEntry::absent, at);
  }
  EXPECT_EQ(t.tracked(), 1u) << "the older ones, a second old, go";
}

}  // namespace
}  // namespace ferry::fastpath
