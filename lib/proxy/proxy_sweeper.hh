// The proxy's housekeeping thread: resets connections idle longer than tcp.proxy.idle_timeout_ms
// and finishes drains (resets what is left after drain_timeout_ms), off the workers' hot path.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/proxy/proxy_service.hh"

namespace ferry::proxy {

class ProxySweeper {
 public:
  ProxySweeper() = default;
  ~ProxySweeper();  // stop()
  ProxySweeper(const ProxySweeper&) = delete;
  ProxySweeper& operator=(const ProxySweeper&) = delete;

  // Sweeps `service` from now on, until it has drained (ProxyService::sweep returns false) or
  // stop(). Starts the thread on first use.
  void watch(std::shared_ptr<ProxyService> service);
  // Re-reads the services' intervals now (after a reload or a drain began).
  void nudge();
  // Joins the thread and forgets every service.
  void stop();
  std::size_t watched() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<ProxyService>> services_;  // guarded by mutex_
  bool stopping_ = false;                                // guarded by mutex_
  bool nudged_ = false;                                  // guarded by mutex_
  std::thread thread_;
};

}  // namespace ferry::proxy
