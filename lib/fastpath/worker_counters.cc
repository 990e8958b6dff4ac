// Drop and unreleased-frame reason names, and the sequence-locked frame account.
#include "lib/fastpath/worker_counters.hh"

namespace ferry::fastpath {

std::string_view to_string(Unreleased reason) {
  switch (reason) {
    case Unreleased::no_answer:
      return "no_answer";
    case Unreleased::failed:
      return "failed";
    case Unreleased::late:
      return "late";
    case Unreleased::unpublished:
      return "unpublished";
    case Unreleased::hold_full:
      return "hold_full";
    case Unreleased::stopped:
      return "stopped";
    case Unreleased::unclassified:
      return "unclassified";
  }
  return "unknown";
}

std::string_view to_string(EncapPath path) {
  switch (path) {
    case EncapPath::ipip4:
      return "ipip4";
    case EncapPath::ipip6:
      return "ipip6";
    case EncapPath::gue4:
      return "gue4";
    case EncapPath::gue6:
      return "gue6";
  }
  return "unknown";
}

void PublishedAccount::publish(const xsk::FrameAccount& a) noexcept {
  std::uint32_t s = sequence_.load(std::memory_order_relaxed);
  sequence_.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const std::uint64_t v[7] = {a.slab_frames, a.free_stack, a.fill,      a.rx,
                              a.in_hands,    a.tx,         a.completion};
  for (int i = 0; i < 7; ++i) values_[i].store(v[i], std::memory_order_relaxed);
  sequence_.store(s + 2, std::memory_order_release);
}

xsk::FrameAccount PublishedAccount::read() const noexcept {
  for (;;) {
    std::uint32_t before = sequence_.load(std::memory_order_acquire);
    std::uint64_t v[7];
    for (int i = 0; i < 7; ++i) v[i] = values_[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((before & 1) == 0 && sequence_.load(std::memory_order_relaxed) == before) {
      return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
    }
  }
}

}  // namespace ferry::fastpath
