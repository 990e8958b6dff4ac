// Token authentication for the TCP control listener.
#include "lib/control/tcp_auth.hh"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "lib/common/unique_fd.hh"
#include "lib/control/json_line.hh"

namespace ferry::control {
namespace {

constexpr std::size_t kMaxTokenFileBytes = 4096;

std::runtime_error token_error(const std::string& path, const std::string& what) {
  return std::runtime_error(fmt::format("control.tcp.token_file {}: {}", path, what));
}

}  // namespace

std::string read_token_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    int err = errno;
    if (err == ENOENT) {
      throw token_error(path, fmt::format("does not exist: create it with a random token "
                                          "(head -c 32 /dev/urandom | base64 > {0}; chmod 600 {0})",
                                          path));
    }
    throw token_error(path, fmt::format("cannot open: {}", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw token_error(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) throw token_error(path, "is not a regular file");
  // Checked on the opened file, so a swap of the path after the check changes nothing.
  if ((st.st_mode & 077) != 0) {
    throw token_error(path, fmt::format("mode {:04o} lets group or others read the token; "
                                        "chmod 600 {}",
                                        st.st_mode & 07777, path));
  }
  if (static_cast<std::size_t>(st.st_size) > kMaxTokenFileBytes) {
    throw token_error(
        path, fmt::format("is larger than {} bytes; a token is one line", kMaxTokenFileBytes));
  }

  std::string token;
  char buffer[1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw token_error(path, fmt::format("cannot read: {}", std::strerror(errno)));
    }
    if (n == 0) break;
    token.append(buffer, static_cast<std::size_t>(n));
    if (token.size() > kMaxTokenFileBytes) {
      throw token_error(
          path, fmt::format("is larger than {} bytes; a token is one line", kMaxTokenFileBytes));
    }
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) throw token_error(path, "is empty: put a random token in it");
  return token;
}

bool token_matches(std::string_view expected, std::string_view given) {
  // Every byte position up to the longer length is visited whatever the contents; the length
  // mismatch is folded into the same accumulator instead of returning early.
  std::size_t length = expected.size() > given.size() ? expected.size() : given.size();
  volatile unsigned char difference = expected.size() == given.size() ? 0 : 1;
  for (std::size_t i = 0; i < length; ++i) {
    unsigned char a = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    unsigned char b = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference = difference | static_cast<unsigned char>(a ^ b);
  }
  return difference == 0;
}

std::optional<std::string> parse_auth_line(std::string_view line) {
  std::string why;
  std::optional<nlohmann::json> doc = parse_json_line(line, why);
  if (!doc || !doc->is_object() || doc->size() != 1) return std::nullopt;
  auto it = doc->find("auth");
  if (it == doc->end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

void AuthFailureLimiter::expire(std::deque<Clock::time_point>& times, Clock::time_point now) const {
  while (!times.empty() && now - times.front() >= window_) times.pop_front();
}

bool AuthFailureLimiter::blocked(const std::string& source, Clock::time_point now) {
  auto it = failures_.find(source);
  if (it == failures_.end()) return false;
  expire(it->second, now);
  if (it->second.empty()) {
    failures_.erase(it);
    return false;
  }
  return it->second.size() >= max_failures_;
}

void AuthFailureLimiter::record_failure(const std::string& source, Clock::time_point now) {
  if (failures_.size() >= max_sources_ && failures_.find(source) == failures_.end()) {
    for (auto it = failures_.begin(); it != failures_.end();) {
      expire(it->second, now);
      it = it->second.empty() ? failures_.erase(it) : std::next(it);
    }
    // Still full: forget an arbitrary source rather than grow without bound.
    if (failures_.size() >= max_sources_) failures_.erase(failures_.begin());
  }
  auto& times = failures_[source];
  expire(times, now);
  times.push_back(now);
  // Only the newest max_failures matter for the decision.
  while (times.size() > max_failures_) times.pop_front();
}

}  // namespace ferry::control
