// Assigning the workers' per-backend counter slots across reloads.
#include "lib/fastpath/backend_slots.hh"

#include <map>
#include <set>
#include <utility>

namespace ferry::fastpath {

struct BackendSlotLease::State {
  using Key = std::pair<std::string, net::Endpoint>;
  struct Slot {
    std::uint32_t holders = 0;  // live leases holding it
    std::map<Key, std::uint32_t>::iterator owner;
  };
  explicit State(std::uint32_t capacity) : slots(capacity) {}

  std::map<Key, std::uint32_t> slot_of;
  std::vector<Slot> slots;
  std::set<std::uint32_t> released;  // free again after counting for a pair: reused first
  std::uint32_t next_fresh = 0;      // slots from here on were never taken
  std::uint32_t used = 0;
  std::uint64_t next_serial = 1;
};

BackendSlotLease::BackendSlotLease(BackendSlotLease&& o) noexcept
    : state_(std::move(o.state_)),
      held_(std::move(o.held_)),
      reused_(std::move(o.reused_)),
      uncounted_(std::exchange(o.uncounted_, 0)),
      serial_(std::exchange(o.serial_, 0)) {
  o.held_.clear();
}

BackendSlotLease& BackendSlotLease::operator=(BackendSlotLease&& o) noexcept {
  if (this != &o) {
    release();
    state_ = std::move(o.state_);
    held_ = std::exchange(o.held_, {});
    reused_ = std::exchange(o.reused_, {});
    uncounted_ = std::exchange(o.uncounted_, 0);
    serial_ = std::exchange(o.serial_, 0);
  }
  return *this;
}

std::uint32_t BackendSlotLease::take(const std::string& service, const net::Endpoint& backend) {
  if (!state_) return packet::kNoCounterSlot;
  State& s = *state_;
  auto [it, added] = s.slot_of.try_emplace(State::Key{service, backend}, packet::kNoCounterSlot);
  if (added) {
    // The lowest free slot: one released before any never taken (all of which are above it).
    if (!s.released.empty()) {
      it->second = *s.released.begin();
      s.released.erase(s.released.begin());
      reused_.push_back(it->second);
    } else if (s.next_fresh < s.slots.size()) {
      it->second = s.next_fresh++;
    } else {
      s.slot_of.erase(it);
      ++uncounted_;
      return packet::kNoCounterSlot;
    }
    s.slots[it->second].owner = it;
    ++s.used;
  }
  ++s.slots[it->second].holders;
  held_.push_back(it->second);
  return it->second;
}

void BackendSlotLease::release() noexcept {
  if (!state_) return;
  State& s = *state_;
  for (std::uint32_t slot : held_) {
    State::Slot& held = s.slots[slot];
    if (--held.holders != 0) continue;
    s.slot_of.erase(held.owner);
    s.released.insert(slot);
    --s.used;
  }
  held_.clear();
  state_.reset();
}

void take_counter_slots(packet::ServiceTableOptions& options, BackendSlotLease& lease) {
  options.counter_slot = [&lease](const config::ServiceConfig& s, const net::Endpoint& b) {
    return lease.take(s.name, b);
  };
}

BackendSlots::BackendSlots(std::uint32_t capacity)
    : state_(std::make_shared<BackendSlotLease::State>(capacity)) {}

BackendSlotLease BackendSlots::lease() {
  BackendSlotLease lease;
  lease.state_ = state_;
  lease.serial_ = state_->next_serial++;
  return lease;
}

std::uint32_t BackendSlots::capacity() const {
  return static_cast<std::uint32_t>(state_->slots.size());
}

std::uint32_t BackendSlots::used() const {
  return state_->used;
}

std::optional<std::uint32_t> BackendSlots::slot_of(const std::string& service,
                                                   const net::Endpoint& backend) const {
  auto it = state_->slot_of.find({service, backend});
  if (it == state_->slot_of.end()) return std::nullopt;
  return it->second;
}

}  // namespace ferry::fastpath
