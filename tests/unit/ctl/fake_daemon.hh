// A stand-in for ferryd's control socket in tests: a temp Unix socket served by one thread that
// answers each request line through a handler and records what it was asked.
#pragma once

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "lib/common/unique_fd.hh"

namespace ferry::ctl::testing {

// Creates a fresh directory under $TMPDIR (or /tmp) and removes it, with its files, at the end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

nlohmann::json ok_response(nlohmann::json result);
nlohmann::json error_response(const std::string& code, const std::string& message);

// How often `what` occurs in `text` (frames of watch and top in one output).
std::size_t occurrences(const std::string& text, const std::string& what);

class FakeDaemon {
 public:
  // Given the request object, returns the response: an object (its "id" is filled in from the
  // request when absent), a string (sent verbatim as the line, to test malformed answers), or
  // null (no answer at all, to test timeouts).
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;

  explicit FakeDaemon(Handler handler);
  ~FakeDaemon();  // stops the thread, closes every socket
  FakeDaemon(const FakeDaemon&) = delete;
  FakeDaemon& operator=(const FakeDaemon&) = delete;

  const std::string& socket_path() const { return socket_path_; }
  std::vector<nlohmann::json> requests() const;  // every request received, in order
  int connections() const;

 private:
  void serve();
  void serve_connection(int fd);

  Handler handler_;
  TempDir dir_;
  std::string socket_path_;
  UniqueFd listener_;
  UniqueFd stop_read_, stop_write_;
  mutable std::mutex mutex_;
  std::vector<nlohmann::json> requests_;
  int connections_ = 0;
  std::thread thread_;
};

}  // namespace ferry::ctl::testing
