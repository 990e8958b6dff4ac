// What ends a thread's body is logged with the thread's name, never std::terminate: every thread
// ferryd starts runs its body through run_guarded().
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ferry {

// Runs `body`. An exception that escapes it is logged as an error naming `thread` and returned
// as its text; nullopt when the body returned normally. Never throws.
std::optional<std::string> run_guarded(std::string_view thread,
                                       const std::function<void()>& body) noexcept;

// For a thread whose state may be corrupt after what escaped it: logs `why`, records exit
// status 70 (EX_SOFTWARE) and raises SIGTERM at the process, whose supervisor then stops
// everything in order and exits with that status (systemd's Restart=on-failure starts it again).
void request_fatal_stop(std::string_view thread, std::string_view why) noexcept;

// 0 until request_fatal_stop() was called, then the exit status it asked for.
int fatal_stop_status() noexcept;

}  // namespace ferry
