// The handover's wire: framed messages (a JSON head, a binary body, file descriptors) between
// two ferryd processes over one Unix stream socket, the fds passed with SCM_RIGHTS.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/common/unique_fd.hh"

namespace ferry::handover {

// CLOCK_MONOTONIC in nanoseconds: one clock for the whole host, so a time taken in one ferryd
// and one taken in the other give the pause between them.
std::uint64_t shared_clock_ns();

struct Message {
  nlohmann::json head;
  std::vector<std::byte> body;  // bulk state (free stacks, flow tables): not worth JSON
  std::vector<UniqueFd> fds;
};

// Thrown for every failure of the channel: the peer went away, timed out, or sent garbage.
class ChannelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Channel {
 public:
  explicit Channel(UniqueFd socket) : socket_(std::move(socket)) {}

  // Sends `head`, `body` and `fds` (which stay open here: the peer gets its own copies).
  void send(const nlohmann::json& head, const std::vector<std::byte>& body = {},
            const std::vector<int>& fds = {});
  // Waits up to `timeout` for the next message.
  Message receive(std::chrono::milliseconds timeout);

  int fd() const { return socket_.get(); }

 private:
  void send_all(const void* data, std::size_t bytes, const int* fds, std::size_t fd_count);
  void receive_all(void* data, std::size_t bytes, std::vector<UniqueFd>* fds,
                   std::chrono::steady_clock::time_point deadline);

  UniqueFd socket_;
};

}  // namespace ferry::handover
