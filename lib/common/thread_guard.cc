// run_guarded() and the fatal stop (see thread_guard.hh).
#include "lib/common/thread_guard.hh"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <exception>

#include "lib/common/log.hh"

namespace ferry {
namespace {

constexpr int kExSoftware = 70;
std::atomic<int> g_fatal_status{0};

// Logging formats and may itself throw (bad_alloc); nothing of that may escape either.
void log_error_quietly(std::string_view thread, std::string_view what,
                       std::string_view then) noexcept {
  try {
    log::error("{}: {}; {}", thread, what, then);
  } catch (...) {
  }
}

}  // namespace

std::optional<std::string> run_guarded(std::string_view thread,
                                       const std::function<void()>& body) noexcept {
  std::string what;
  try {
    body();
    return std::nullopt;
  } catch (const std::exception& e) {
    try {
      what = e.what();
    } catch (...) {
    }
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  log_error_quietly(thread, what, "caught at the thread's entry");
  return what;
}

void request_fatal_stop(std::string_view thread, std::string_view why) noexcept {
  log_error_quietly(thread, why,
                    "its state cannot be trusted: ferryd stops cleanly and exits with status 70");
  int expected = 0;
  g_fatal_status.compare_exchange_strong(expected, kExSoftware);
  ::kill(::getpid(), SIGTERM);
}

int fatal_stop_status() noexcept {
  return g_fatal_status.load();
}

}  // namespace ferry
