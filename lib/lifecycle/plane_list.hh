// The daemon as an ordered list of planes: starting afresh and taking over are the same loop
// (with or without an offer), a reload is every plane's prepare() before any commit(), and the
// stop and the handover's release are the same loop in reverse.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "lib/lifecycle/plane.hh"

namespace ferry::lifecycle {

// Threads: as Plane's (plane.hh); the list itself is touched by whoever may touch its planes.
class PlaneList {
 public:
  // The planes in start order; they must outlive the list.
  explicit PlaneList(std::vector<Plane*> in_order) : planes_(std::move(in_order)) {}

  // Starts every plane in order, each from its part of `offer` (afresh when null). An offer
  // without a part for one of them is refused naming it (handover::OfferError) before anything
  // starts. When a plane fails, the ones started before it are unwound in reverse (released
  // first when taking over, then stopped) and the error is rethrown.
  void start(const config::Config& config, handover::Offer* offer);
  // Every started plane serves, in order, with its part of `paused` (null parts when it is).
  void serve(handover::Offer* paused);

  // Applies `next` to every plane (once they have started): every prepare(), then every
  // commit(). A prepare() that throws leaves every plane as it was. A commit() that throws has
  // `running` (when given) committed again to the planes it reached, itself included, then the
  // error is rethrown; `notes` are then those of the restore.
  void apply(const config::Config& next, const config::Config* running, ApplyNotes& notes);

  // The running ferryd's side of a handover: every started plane's part, in order.
  void describe(handover::Offer& offer);
  void pause(handover::Offer& paused);
  // In reverse: the started planes leave what they handed over (a handover committed, or a
  // takeover that failed), then stop; stop() leaves no plane started.
  void release();
  void stop();

  std::size_t started() const { return started_; }
  bool took_over() const { return took_over_; }

 private:
  void unwind();

  std::vector<Plane*> planes_;
  std::size_t started_ = 0;  // planes_[0, started_) are up
  bool took_over_ = false;   // started from an offer
};

}  // namespace ferry::lifecycle
