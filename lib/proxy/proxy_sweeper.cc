// The proxy's housekeeping thread (see proxy_sweeper.hh).
#include "lib/proxy/proxy_sweeper.hh"

#include <algorithm>
#include <chrono>

#include "lib/common/thread_guard.hh"

namespace ferry::proxy {

ProxySweeper::~ProxySweeper() {
  stop();
}

void ProxySweeper::watch(std::shared_ptr<ProxyService> service) {
  std::lock_guard lock(mutex_);
  if (std::find(services_.begin(), services_.end(), service) == services_.end()) {
    services_.push_back(std::move(service));
  }
  nudged_ = true;
  if (!thread_.joinable()) {
    stopping_ = false;
    thread_ = std::thread([this] {
      if (run_guarded("proxy sweeper", [this] { run(); })) {
        request_fatal_stop("proxy sweeper", "idle and draining connections would never close");
      }
    });
  }
  cv_.notify_all();
}

void ProxySweeper::nudge() {
  std::lock_guard lock(mutex_);
  nudged_ = true;
  cv_.notify_all();
}

void ProxySweeper::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  services_.clear();
}

std::size_t ProxySweeper::watched() const {
  std::lock_guard lock(mutex_);
  return services_.size();
}

void ProxySweeper::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    std::vector<std::shared_ptr<ProxyService>> services = services_;
    lock.unlock();
    auto tick = std::chrono::milliseconds(1000);
    std::vector<ProxyService*> done;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& s : services) {
      if (!s->sweep(now)) {
        done.push_back(s.get());
        continue;
      }
      tick = std::min(tick, s->sweep_interval());
    }
    services.clear();  // a drained service may be freed here, outside the lock
    lock.lock();
    std::erase_if(services_, [&](const std::shared_ptr<ProxyService>& s) {
      return std::find(done.begin(), done.end(), s.get()) != done.end();
    });
    cv_.wait_for(lock, tick, [this] { return stopping_ || nudged_; });
    nudged_ = false;
  }
}

}  // namespace ferry::proxy
