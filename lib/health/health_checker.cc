// The health checker's loop: due checks are started (check.hh), their sockets wait in one epoll
// with the wake eventfd, and the nearest due time or deadline bounds the wait.
#include "lib/health/health_checker.hh"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include "lib/common/log.hh"
#include "lib/common/thread_guard.hh"

namespace ferry::health {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// The loop turns at least this often, so the heartbeat shows the thread alive when idle.
constexpr milliseconds kMaxWait{1000};
// Each next check is spread by up to this share of the interval either way, so checks started
// together drift apart.
constexpr int kJitterPercent = 10;
constexpr std::uint64_t kWakeToken = 0;

}  // namespace

// One checked backend: its schedule, its check in flight, its streaks. Thread-owned.
struct HealthChecker::Probe {
  CheckTarget target;
  std::string backend_text;
  BackendHealth view;
  Clock::time_point due;
  Clock::time_point started;
  Clock::time_point deadline;
  std::unique_ptr<Check> check;  // set while a check is in flight
  std::uint32_t events = 0;      // what its socket waits for in the epoll
  std::uint64_t token = 0;
};

std::vector<CheckTarget> check_targets(std::span<const config::ServiceConfig> services,
                                       const TunnelMarks* marks) {
  std::vector<CheckTarget> targets;
  for (const auto& s : services) {
    if (!s.health || s.mode != config::ServiceMode::proxy) continue;
    for (const auto& b : s.backends) {
      CheckTarget t{s.name, b, *s.health, std::nullopt};
      if (marks && s.forwarding != config::Forwarding::nat) {
        if (auto mark = marks->mark_of({s.forwarding, b.address})) t.tunnel = {*mark, s.vip};
      }
      targets.push_back(std::move(t));
    }
  }
  return targets;
}

std::vector<std::pair<std::string, net::Endpoint>> configured_backends(
    std::span<const config::ServiceConfig> services) {
  std::vector<std::pair<std::string, net::Endpoint>> out;
  for (const auto& s : services) {
    for (const auto& b : s.backends) out.emplace_back(s.name, b);
  }
  return out;
}

HealthChecker::HealthChecker(HealthBoard& board, HealthCheckerOptions options)
    : board_(board),
      options_(std::move(options)),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      rng_state_(options_.jitter_seed ? options_.jitter_seed : std::random_device{}()) {
  if (!epoll_fd_) throw std::system_error(errno, std::generic_category(), "health: epoll_create1");
  if (!wake_fd_) throw std::system_error(errno, std::generic_category(), "health: eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev) != 0) {
    throw std::system_error(errno, std::generic_category(), "health: epoll_ctl(eventfd)");
  }
}

HealthChecker::~HealthChecker() {
  stop();
}

void HealthChecker::start() {
  std::lock_guard lock(control_mutex_);
  if (running_) return;
  stop_ = false;
  exited_ = false;
  running_ = true;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "ferry-health");
    // A probe left half finished would never be judged again: stop in order instead.
    if (run_guarded("health checker", [this] { run(); })) {
      request_fatal_stop("health checker", "backends would no longer be checked");
    }
  });
}

void HealthChecker::stop() noexcept {
  {
    std::lock_guard lock(control_mutex_);
    if (!running_) return;
    stop_ = true;
  }
  std::uint64_t one = 1;
  if (::write(wake_fd_.get(), &one, sizeof(one)) < 0) {
    // The loop also wakes within kMaxWait.
  }
  thread_.join();
  std::lock_guard lock(control_mutex_);
  running_ = false;
}

void HealthChecker::set_targets(std::vector<CheckTarget> targets) {
  std::unique_lock lock(control_mutex_);
  if (!running_ || exited_) {
    // No thread to race with: apply here.
    lock.unlock();
    apply_targets(std::move(targets));
    return;
  }
  pending_ = std::move(targets);
  std::uint64_t ticket = ++requested_;
  std::uint64_t one = 1;
  if (::write(wake_fd_.get(), &one, sizeof(one)) < 0) {
    // The loop also wakes within kMaxWait.
  }
  applied_.wait(lock, [&] { return taken_ >= ticket || exited_; });
}

std::vector<BackendHealth> HealthChecker::snapshot() const {
  std::lock_guard lock(views_mutex_);
  std::vector<BackendHealth> out;
  out.reserve(views_.size());
  for (const auto& [key, view] : views_) out.push_back(view);
  return out;
}

std::uint64_t HealthChecker::random_below(std::uint64_t bound) {
  // splitmix64: cheap, and seeded per checker so tests can fix it.
  std::uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return bound ? z % bound : 0;
}

milliseconds HealthChecker::jittered(milliseconds interval) {
  std::int64_t spread = interval.count() * kJitterPercent / 100;
  std::int64_t offset =
      static_cast<std::int64_t>(random_below(static_cast<std::uint64_t>(2 * spread + 1))) - spread;
  return milliseconds(interval.count() + offset);
}

void HealthChecker::publish(const Probe& probe) {
  std::lock_guard lock(views_mutex_);
  views_[{probe.target.service, probe.backend_text}] = probe.view;
}

void HealthChecker::describe_target(Probe& p) {
  const CheckTarget& t = p.target;
  p.view.type = t.params.type;
  CheckAddress address = check_address(t.params, t.backend, t.tunnel);
  p.view.target = address.endpoint;
  p.view.tunnel_mark = t.tunnel ? std::optional(address.mark) : std::nullopt;
}

void HealthChecker::apply_targets(std::vector<CheckTarget> targets) {
  auto now = Clock::now();
  std::map<Key, CheckTarget> next;
  for (auto& t : targets) {
    std::string text = t.backend.to_string();
    next.emplace(Key{t.service, std::move(text)}, std::move(t));
  }
  // Dropped: close the check in flight, and give the backend back to traffic.
  for (auto it = probes_.begin(); it != probes_.end();) {
    if (next.contains(it->first)) {
      ++it;
      continue;
    }
    Probe& p = *it->second;
    if (p.token) by_token_.erase(p.token);
    board_.set_checked(p.target.service, p.target.backend, false);
    if (board_.set_up(p.target.service, p.target.backend, true)) {
      log::notice("service {} backend {} up: health checks removed", p.target.service,
                  p.backend_text);
    }
    {
      std::lock_guard lock(views_mutex_);
      views_.erase(it->first);
    }
    it = probes_.erase(it);
  }
  for (auto& [key, target] : next) {
    auto it = probes_.find(key);
    if (it != probes_.end()) {
      Probe& p = *it->second;
      // Same backend, maybe new params: a shorter interval brings the next check forward.
      auto sooner = now + milliseconds(target.params.interval_ms);
      if (!p.check && p.due > sooner) p.due = sooner;
      p.target = std::move(target);
      describe_target(p);
      publish(p);
      continue;
    }
    auto p = std::make_unique<Probe>();
    p->target = std::move(target);
    p->backend_text = key.second;
    p->view.service = p->target.service;
    p->view.backend = p->target.backend;
    describe_target(*p);
    board_.set_checked(p->target.service, p->target.backend, true);
    p->view.up =
        board_.state(p->target.service, p->target.backend)->up.load(std::memory_order_relaxed);
    // A random phase within the first interval, so backends configured together are not checked
    // in lockstep.
    p->due = now + milliseconds(random_below(p->target.params.interval_ms));
    publish(*p);
    probes_.emplace(key, std::move(p));
  }
  log::debug("health: {} backends checked", probes_.size());
}

void HealthChecker::launch(Probe& p, Clock::time_point now) {
  p.started = now;
  p.deadline = now + milliseconds(p.target.params.timeout_ms);
  p.check = make_check(p.target.params, p.target.backend, p.target.tunnel);
  CheckStep step = p.check->start();
  if (step.finished()) {
    finish(p, step.outcome.result, std::move(step.outcome.reason), now);
    return;
  }
  p.token = next_token_++;
  epoll_event ev{};
  ev.events = step.events;
  ev.data.u64 = p.token;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, p.check->fd(), &ev) != 0) {
    int err = errno;
    p.token = 0;
    finish(p, CheckResult::error, "epoll_ctl: " + describe_errno(err), now);
    return;
  }
  p.events = step.events;
  by_token_[p.token] = &p;
}

void HealthChecker::resume(Probe& p, std::uint32_t events, Clock::time_point now) {
  CheckStep step = p.check->resume(events);
  if (step.finished()) {
    finish(p, step.outcome.result, std::move(step.outcome.reason), now);
    return;
  }
  if (step.events == p.events) return;
  epoll_event ev{};
  ev.events = step.events;
  ev.data.u64 = p.token;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, p.check->fd(), &ev) != 0) {
    int err = errno;
    finish(p, CheckResult::error, "epoll_ctl: " + describe_errno(err), now);
    return;
  }
  p.events = step.events;
}

void HealthChecker::finish(Probe& p, CheckResult result, std::string reason,
                           Clock::time_point now) {
  if (p.token) by_token_.erase(p.token);
  p.token = 0;
  p.events = 0;
  p.check.reset();  // closing its socket removes it from the epoll
  const auto& params = p.target.params;
  p.due = p.started + jittered(milliseconds(params.interval_ms));
  if (p.due <= now) p.due = now + milliseconds(1);

  BackendHealth& v = p.view;
  ++v.checks[static_cast<std::size_t>(result)];
  v.last_check_at = now;
  v.last_result = result;
  v.last_reason = reason;
  double seconds = std::chrono::duration<double>(now - p.started).count();
  auto bucket = std::lower_bound(kCheckDurationBounds.begin(), kCheckDurationBounds.end(), seconds);
  ++v.duration_buckets[static_cast<std::size_t>(bucket - kCheckDurationBounds.begin())];
  v.duration_sum_seconds += seconds;
  bool ok = result == CheckResult::ok;
  if (ok) {
    board_.set_passed(p.target.service, p.target.backend);
    v.last_connect_ms = seconds * 1000;
    ++v.consecutive_successes;
    v.consecutive_failures = 0;
  } else {
    v.last_error = reason;
    ++v.consecutive_failures;
    v.consecutive_successes = 0;
  }
  const std::string& service = p.target.service;
  if (ok && !v.up && v.consecutive_successes >= params.rise) {
    v.up = true;
    if (board_.set_up(service, p.target.backend, true)) ++v.went_up;
    log::notice("service {} backend {} up: {} in {:.1f} ms ({} consecutive successes)", service,
                p.backend_text, reason, v.last_connect_ms, v.consecutive_successes);
  } else if (!ok && v.up && v.consecutive_failures >= params.fall) {
    v.up = false;
    if (board_.set_up(service, p.target.backend, false)) ++v.went_down;
    log::notice("service {} backend {} down: {} ({} consecutive failures)", service, p.backend_text,
                reason, v.consecutive_failures);
  } else if (!ok && v.up) {
    log::debug("service {} backend {} check failed: {} ({} of {})", service, p.backend_text, reason,
               v.consecutive_failures, params.fall);
  }
  publish(p);
}

void HealthChecker::run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  for (;;) {
    if (options_.heartbeat) options_.heartbeat();
    {
      std::unique_lock lock(control_mutex_);
      if (stop_) break;
      if (pending_) {
        auto targets = std::move(*pending_);
        pending_.reset();
        std::uint64_t ticket = requested_;
        lock.unlock();
        apply_targets(std::move(targets));
        lock.lock();
        taken_ = ticket;
        applied_.notify_all();
      }
    }
    auto now = Clock::now();
    auto wake_at = now + kMaxWait;
    for (auto& [key, probe] : probes_) {
      Probe& p = *probe;
      if (p.check && now >= p.deadline) {
        finish(p, CheckResult::timeout, p.check->timeout_reason(p.target.params.timeout_ms), now);
      }
      if (!p.check && now >= p.due) launch(p, now);
      wake_at = std::min(wake_at, p.check ? p.deadline : p.due);
    }
    auto wait = std::chrono::ceil<milliseconds>(wake_at - Clock::now());
    int n = ::epoll_wait(epoll_fd_.get(), events, kMaxEvents,
                         static_cast<int>(std::max<std::int64_t>(0, wait.count())));
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("health: epoll_wait: {}; health checks stop", std::strerror(errno));
      break;
    }
    now = Clock::now();
    for (int i = 0; i < n; ++i) {
      std::uint64_t token = events[i].data.u64;
      if (token == kWakeToken) {
        std::uint64_t count;
        while (::read(wake_fd_.get(), &count, sizeof(count)) > 0) {
        }
        continue;
      }
      auto it = by_token_.find(token);
      if (it == by_token_.end()) continue;  // finished by its deadline this turn
      resume(*it->second, events[i].events, now);
    }
  }
  // In-flight sockets close with their probes; the board keeps the last state.
  for (auto& [key, probe] : probes_) {
    probe->check.reset();
    probe->token = 0;
    probe->events = 0;
  }
  by_token_.clear();
  std::lock_guard lock(control_mutex_);
  exited_ = true;
  applied_.notify_all();
}

}  // namespace ferry::health
