// Open things (connections) counted per key (a uid, a source address) against one budget per key.
// A key with nothing open is forgotten, so memory follows what is open, never what was seen.
#pragma once

#include <cstddef>
#include <unordered_map>

namespace ferry {

template <typename Key>
class KeyedBudget {
 public:
  explicit KeyedBudget(std::size_t per_key) : per_key_(per_key) {}

  std::size_t per_key() const { return per_key_; }
  std::size_t held(const Key& key) const {
    auto it = held_.find(key);
    return it == held_.end() ? 0 : it->second;
  }
  bool full(const Key& key) const { return held(key) >= per_key_; }
  // Callers check full() first; take() itself does not refuse.
  void take(const Key& key) { ++held_[key]; }
  void give_back(const Key& key) {
    auto it = held_.find(key);
    if (it == held_.end()) return;
    if (--it->second == 0) held_.erase(it);
  }
  // Keys holding at least one.
  std::size_t keys() const { return held_.size(); }

 private:
  std::size_t per_key_;
  std::unordered_map<Key, std::size_t> held_;
};

}  // namespace ferry
