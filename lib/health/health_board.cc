// HealthBoard: a mutex-guarded map of stable per-backend flags; readers keep the flags, not the
// map.
#include "lib/health/health_board.hh"

namespace ferry::health {

namespace {
// By the endpoint itself, not its text: a lookup formats nothing.
std::pair<std::string, net::Endpoint> key_of(const std::string& service,
                                             const net::Endpoint& backend) {
  return {service, backend};
}
}  // namespace

std::shared_ptr<BackendState> HealthBoard::find_or_add(const std::string& service,
                                                       const net::Endpoint& backend) {
  auto key = key_of(service, backend);
  auto it = states_.find(key);
  if (it == states_.end()) {
    it = states_.emplace(key, std::make_shared<BackendState>()).first;
    endpoints_.emplace(key, backend);
  }
  return it->second;
}

std::shared_ptr<const BackendState> HealthBoard::state(const std::string& service,
                                                       const net::Endpoint& backend) {
  std::lock_guard lock(mutex_);
  return find_or_add(service, backend);
}

bool HealthBoard::set_up(const std::string& service, const net::Endpoint& backend, bool up) {
  std::vector<TransitionListener> listeners;
  {
    std::lock_guard lock(mutex_);
    auto state = find_or_add(service, backend);
    if (state->up.exchange(up, std::memory_order_relaxed) == up) return false;
    listeners = listeners_;
  }
  for (const auto& listener : listeners) listener(service, backend, up);
  return true;
}

void HealthBoard::set_checked(const std::string& service, const net::Endpoint& backend,
                              bool checked) {
  std::lock_guard lock(mutex_);
  find_or_add(service, backend)->checked.store(checked, std::memory_order_relaxed);
}

void HealthBoard::set_passed(const std::string& service, const net::Endpoint& backend) {
  std::vector<FirstPassListener> listeners;
  {
    std::lock_guard lock(mutex_);
    if (find_or_add(service, backend)->passed.exchange(true, std::memory_order_relaxed)) return;
    listeners = first_pass_listeners_;
  }
  for (const auto& listener : listeners) listener(service, backend);
}

void HealthBoard::subscribe_first_pass(FirstPassListener listener) {
  std::lock_guard lock(mutex_);
  first_pass_listeners_.push_back(std::move(listener));
}

void HealthBoard::subscribe(TransitionListener listener) {
  std::lock_guard lock(mutex_);
  listeners_.push_back(std::move(listener));
}

void HealthBoard::retain(const std::vector<std::pair<std::string, net::Endpoint>>& configured) {
  std::map<std::pair<std::string, net::Endpoint>, bool> keep;
  for (const auto& [service, backend] : configured) keep[key_of(service, backend)] = true;
  std::lock_guard lock(mutex_);
  for (auto it = states_.begin(); it != states_.end();) {
    if (keep.contains(it->first)) {
      ++it;
    } else {
      endpoints_.erase(it->first);
      it = states_.erase(it);
    }
  }
}

std::vector<HealthBoard::Entry> HealthBoard::snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<Entry> entries;
  entries.reserve(states_.size());
  for (const auto& [key, state] : states_) {
    entries.push_back({key.first, endpoints_.at(key), state->up.load(std::memory_order_relaxed),
                       state->checked.load(std::memory_order_relaxed)});
  }
  return entries;
}

}  // namespace ferry::health
