// A stand-in for ferryd's control socket in tests: a temp Unix socket served by one thread that
// answers each request line through a handler and records what it was asked.
#include "tests/unit/ctl/fake_daemon.hh"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ferry::ctl::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/ferryctl-test-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ignored);
  std::filesystem::remove_all(path_, ignored);
}

nlohmann::json ok_response(nlohmann::json result) {
  return {{"ok", true}, {"result", std::move(result)}};
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

nlohmann::json error_response(const std::string& code, const std::string& message) {
  return {{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
}

FakeDaemon::FakeDaemon(Handler handler)
    : handler_(std::move(handler)), socket_path_(dir_.path() + "/ferryd.sock") {
  listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof addr.sun_path - 1);
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_.get(), 8) != 0) {
    throw std::runtime_error("fake ferryd: cannot listen on " + socket_path_);
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  stop_read_.reset(pipe_fds[0]);
  stop_write_.reset(pipe_fds[1]);
  thread_ = std::thread([this] { serve(); });
}

FakeDaemon::~FakeDaemon() {
  char byte = 1;
  (void)!::write(stop_write_.get(), &byte, 1);
  thread_.join();
}

std::vector<nlohmann::json> FakeDaemon::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

int FakeDaemon::connections() const {
  std::lock_guard lock(mutex_);
  return connections_;
}

void FakeDaemon::serve() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) return;
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) continue;
    {
      std::lock_guard lock(mutex_);
      ++connections_;
    }
    serve_connection(conn.get());
  }
}

// One connection at a time is all ferryctl ever opens; returns when the client hangs up or the
// daemon is stopped.
void FakeDaemon::serve_connection(int fd) {
  std::string buffered;
  for (;;) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) return;
    char chunk[4096];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return;
    buffered.append(chunk, static_cast<std::size_t>(n));
    for (std::size_t newline; (newline = buffered.find('\n')) != std::string::npos;) {
      nlohmann::json request = nlohmann::json::parse(buffered.substr(0, newline));
      buffered.erase(0, newline + 1);
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
      }
      nlohmann::json response = handler_(request);
      if (response.is_null()) continue;
      std::string line;
      if (response.is_string()) {
        line = response.get<std::string>();
      } else {
        if (!response.contains("id")) response["id"] = request["id"];
        line = response.dump();
      }
      line += "\n";
      (void)!::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
    }
  }
}

}  // namespace ferry::ctl::testing
