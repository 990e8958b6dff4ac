// The ferryctl side of the control protocol: one Unix stream connection to ferryd, one JSON
// request per line, answers matched to requests by id, every wait bounded by a timeout.
#include "lib/ctl/client.hh"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace ferry::ctl {
namespace {

using Clock = std::chrono::steady_clock;

// A response line longer than this is not ferryd talking (its largest answer, `config`, is the
// config file); stop reading instead of growing without bound.
constexpr std::size_t kMaxResponseBytes = 64 * 1024 * 1024;

constexpr std::string_view kDefaultSocketGroup = "ferry";

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string errno_text(int err) {
  return std::strerror(err);
}

CtlError protocol_error(const std::string& what) {
  return CtlError(ExitCode::timeout, what);
}

// The group that owns the socket file, so the EACCES hint names the group that would help.
std::string socket_group_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string(kDefaultSocketGroup);
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  if (::getgrgid_r(st.st_gid, &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
    return fmt::format("gid {}", st.st_gid);
  }
  return found->gr_name;
}

}  // namespace

ExitCode connect_errno_exit_code(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
      return ExitCode::permission_denied;
    case EAGAIN:
    case EINPROGRESS:
    case ETIMEDOUT:
      return ExitCode::timeout;
    default:
      return ExitCode::not_running;
  }
}

std::string connect_failure_message(std::string_view socket_path, int err,
                                    std::string_view socket_group) {
  switch (err) {
    case ENOENT:
    case ECONNREFUSED:
      return fmt::format("cannot connect to {}: ferryd is not running ({})", socket_path,
                         errno_text(err));
    case EACCES:
    case EPERM:
      return fmt::format(
          "cannot connect to {}: permission denied: add yourself to the socket's group ({}) or "
          "run as root",
          socket_path, socket_group);
    case EAGAIN:
    case EINPROGRESS:
    case ETIMEDOUT:
      return fmt::format(
          "cannot connect to {}: ferryd did not accept the connection in time (its listen "
          "backlog is full; raise --timeout-ms or retry)",
          socket_path);
    default:
      return fmt::format("cannot connect to {}: {}", socket_path, errno_text(err));
  }
}

CtlError connect_failure(std::string_view socket_path, int err, std::string_view socket_group) {
  return CtlError(connect_errno_exit_code(err),
                  connect_failure_message(socket_path, err, socket_group));
}

ExitCode daemon_error_exit_code(std::string_view code) {
  if (code == "permission_denied" || code == "unauthorized") return ExitCode::permission_denied;
  return ExitCode::daemon_error;
}

Client Client::connect(const std::string& socket_path, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    throw CtlError(ExitCode::usage,
                   fmt::format("socket path must be 1 to {} bytes long, got {}: '{}'",
                               sizeof(addr.sun_path) - 1, socket_path.size(), socket_path));
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());

  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw CtlError(ExitCode::not_running, "cannot create a socket: " + errno_text(errno));
  // A blocking AF_UNIX connect waits only while the listen backlog is full, and honours
  // SO_SNDTIMEO for that wait; EAGAIN then means "not accepted in time".
  if (timeout_ms > 0) {
    timeval tv{};
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = static_cast<suseconds_t>(timeout_ms % 1000) * 1000;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    throw connect_failure(socket_path, err,
                          err == EACCES || err == EPERM ? socket_group_of(socket_path)
                                                        : std::string(kDefaultSocketGroup));
  }
  return Client(std::move(fd), timeout_ms);
}

Client::Client(UniqueFd fd, int timeout_ms) : fd_(std::move(fd)), timeout_ms_(timeout_ms) {
  // Every later wait is a poll() against the call's deadline.
  int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK);
}

Response Client::call(std::string_view cmd, const nlohmann::json& args) {
  deadline_ns_ = now_ns() + static_cast<std::int64_t>(timeout_ms_) * 1'000'000;
  const std::uint64_t id = next_id_++;
  nlohmann::json request = {{"id", id}, {"cmd", cmd}, {"args", args}};
  send_all(request.dump() + "\n", cmd);
  for (;;) {
    Response response = parse_response(read_line(cmd));
    const nlohmann::json& got = response.raw["id"];
    if (got.is_number_unsigned() && got.get<std::uint64_t>() == id) return response;
    if (got.is_null() && !response.ok) return response;
    // An answer to an earlier request (one we gave up on): not ours, keep reading.
  }
}

namespace {

// Waits for `events` on fd until the deadline; false when the deadline passed.
bool wait_for(int fd, short events, int timeout_ms, std::int64_t deadline_ns) {
  for (;;) {
    int wait_ms = -1;
    if (timeout_ms > 0) {
      std::int64_t left_ns = deadline_ns - now_ns();
      if (left_ns <= 0) return false;
      wait_ms = static_cast<int>((left_ns + 999'999) / 1'000'000);
    }
    pollfd pfd{fd, events, 0};
    int n = ::poll(&pfd, 1, wait_ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) {
      throw protocol_error("waiting for ferryd failed: " + errno_text(errno));
    }
  }
}

CtlError no_answer(std::string_view cmd, int timeout_ms) {
  return protocol_error(fmt::format(
      "ferryd did not answer '{}' within {} ms (is it stuck? raise --timeout-ms to wait longer)",
      cmd, timeout_ms));
}

CtlError connection_closed(std::string_view cmd) {
  return protocol_error(fmt::format(
      "ferryd closed the connection before answering '{}' (did it stop or restart?)", cmd));
}

}  // namespace

void Client::send_all(std::string_view data, std::string_view cmd) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd_.get(), POLLOUT, timeout_ms_, deadline_ns_)) {
        throw no_answer(cmd, timeout_ms_);
      }
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) throw connection_closed(cmd);
    throw protocol_error(fmt::format("sending '{}' to ferryd failed: {}", cmd, errno_text(errno)));
  }
}

std::string Client::read_line(std::string_view cmd) {
  std::size_t scanned = 0;
  for (;;) {
    std::size_t newline = buffered_.find('\n', scanned);
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    scanned = buffered_.size();
    if (buffered_.size() > kMaxResponseBytes) {
      throw protocol_error(
          fmt::format("ferryd's answer to '{}' is longer than {} bytes", cmd, kMaxResponseBytes));
    }
    char chunk[65536];
    ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      buffered_.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) throw connection_closed(cmd);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd_.get(), POLLIN, timeout_ms_, deadline_ns_))
        throw no_answer(cmd, timeout_ms_);
      continue;
    }
    if (errno == ECONNRESET) throw connection_closed(cmd);
    throw protocol_error(
        fmt::format("reading ferryd's answer to '{}' failed: {}", cmd, errno_text(errno)));
  }
}

Response parse_response(std::string_view line) {
  auto malformed = [&](std::string_view why) {
    constexpr std::size_t kShown = 200;
    std::string shown(line.substr(0, kShown));
    if (line.size() > kShown) shown += "...";
    return protocol_error(fmt::format("malformed response from ferryd ({}): {}", why, shown));
  };
  Response response;
  response.raw = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (response.raw.is_discarded()) throw malformed("not JSON");
  if (!response.raw.is_object()) throw malformed("not a JSON object");
  auto ok = response.raw.find("ok");
  if (ok == response.raw.end() || !ok->is_boolean()) throw malformed("no boolean \"ok\"");
  if (!response.raw.contains("id")) throw malformed("no \"id\"");
  response.ok = ok->get<bool>();
  if (response.ok) {
    auto result = response.raw.find("result");
    if (result == response.raw.end()) throw malformed("\"ok\":true without \"result\"");
    response.result = *result;
    return response;
  }
  auto error = response.raw.find("error");
  if (error == response.raw.end() || !error->is_object()) throw malformed("no \"error\" object");
  auto code = error->find("code");
  if (code == error->end() || !code->is_string()) throw malformed("no string \"error.code\"");
  response.error_code = code->get<std::string>();
  auto message = error->find("message");
  if (message != error->end() && message->is_string()) {
    response.error_message = message->get<std::string>();
  }
  return response;
}

const nlohmann::json& expect_ok(const Response& response) {
  if (response.ok) return response.result;
  throw CtlError(daemon_error_exit_code(response.error_code),
                 fmt::format("{}: {}", response.error_code, response.error_message));
}

}  // namespace ferry::ctl
