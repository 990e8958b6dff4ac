// A slot taken from a budget and given back when the lease ends (moved-from leases hold nothing).
// The budget must outlive its leases; it is called as budget.release(slot).
#pragma once

#include <utility>

namespace ferry {

template <typename Budget, typename Slot>
class Lease {
 public:
  Lease() = default;
  Lease(Budget& budget, Slot slot) : budget_(&budget), slot_(std::move(slot)) {}
  Lease(Lease&& other) noexcept
      : budget_(std::exchange(other.budget_, nullptr)), slot_(std::move(other.slot_)) {}
  Lease& operator=(Lease&& other) noexcept {
    if (this != &other) {
      reset();
      budget_ = std::exchange(other.budget_, nullptr);
      slot_ = std::move(other.slot_);
    }
    return *this;
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { reset(); }

  // Gives the slot back now. Idempotent.
  void reset() {
    if (Budget* budget = std::exchange(budget_, nullptr)) budget->release(slot_);
  }
  bool held() const { return budget_ != nullptr; }
  const Slot& slot() const { return slot_; }
  // For the budget that issued it, to move the lease to another class of slot.
  Slot& slot() { return slot_; }

 private:
  Budget* budget_ = nullptr;
  Slot slot_{};
};

}  // namespace ferry
