// The daemon's planes in order (see plane_list.hh).
#include "lib/lifecycle/plane_list.hh"

#include <map>
#include <optional>

#include "lib/common/log.hh"

namespace ferry::lifecycle {

void PlaneList::start(const config::Config& config, handover::Offer* offer) {
  // Every part first: an offer that lacks one is refused before anything is touched.
  std::vector<std::optional<handover::OfferPart>> parts(planes_.size());
  if (offer) {
    for (std::size_t i = 0; i < planes_.size(); ++i) {
      parts[i] = offer->take_part(planes_[i]->name());
    }
  }
  took_over_ = offer != nullptr;
  for (std::size_t i = started_; i < planes_.size(); ++i) {
    try {
      planes_[i]->start(config, parts[i] ? &*parts[i] : nullptr);
    } catch (...) {
      unwind();
      throw;
    }
    started_ = i + 1;
  }
}

void PlaneList::serve(handover::Offer* paused) {
  for (std::size_t i = 0; i < started_; ++i) {
    Plane& plane = *planes_[i];
    std::optional<handover::OfferPart> part;
    if (paused && paused->has_part(plane.name())) part = paused->take_part(plane.name());
    plane.serve(part ? &*part : nullptr);
  }
}

void PlaneList::apply(const config::Config& next, const config::Config* running,
                      ApplyNotes& notes) {
  for (Plane* plane : planes_) plane->prepare(next);
  for (std::size_t i = 0; i < planes_.size(); ++i) {
    try {
      planes_[i]->commit(next, notes);
    } catch (...) {
      if (!running) throw;
      // Re-establish what the running configuration had, where this apply changed it.
      notes = ApplyNotes{};
      for (std::size_t j = 0; j <= i; ++j) {
        try {
          planes_[j]->commit(*running, notes);
        } catch (const std::exception& again) {
          log::error("restoring the running configuration's data plane failed too: {} ({} plane)",
                     again.what(), planes_[j]->name());
        }
      }
      throw;
    }
  }
}

void PlaneList::describe(handover::Offer& offer) {
  for (std::size_t i = 0; i < started_; ++i) planes_[i]->describe(offer.part(planes_[i]->name()));
}

void PlaneList::pause(handover::Offer& paused) {
  for (std::size_t i = 0; i < started_; ++i) planes_[i]->pause(paused.part(planes_[i]->name()));
}

void PlaneList::release() {
  for (std::size_t i = started_; i-- > 0;) planes_[i]->release();
}

void PlaneList::stop() {
  for (; started_ > 0; --started_) planes_[started_ - 1]->stop();
}

void PlaneList::unwind() {
  if (took_over_) release();
  stop();
}

}  // namespace ferry::lifecycle
