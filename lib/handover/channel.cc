// The handover's wire (see channel.hh). A frame is a 16-byte header (magic, head length, body
// length, fd count), the head, the body; the fds ride on the header and, past what one
// sendmsg() may carry, on one-byte frames that follow it.
#include "lib/handover/channel.hh"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ferry::handover {
namespace {

constexpr std::uint32_t kMagic = 0x66727931;  // "fry1"
constexpr std::size_t kFdsPerSend = 250;      // SCM_MAX_FD is 253
constexpr std::uint32_t kMaxHeadBytes = 16u << 20;
constexpr std::uint32_t kMaxBodyBytes = 1u << 30;
constexpr std::uint32_t kMaxFds = 65536;

struct Header {
  std::uint32_t magic;
  std::uint32_t head_bytes;
  std::uint32_t body_bytes;
  std::uint32_t fd_count;
};

[[noreturn]] void fail(const std::string& what, int err = 0) {
  throw ChannelError(err ? what + ": " + std::strerror(err) : what);
}

}  // namespace

std::uint64_t shared_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void Channel::send_all(const void* data, std::size_t bytes, const int* fds, std::size_t fd_count) {
  const auto* p = static_cast<const char*>(data);
  bool fds_sent = fd_count == 0;
  while (bytes > 0 || !fds_sent) {
    msghdr msg{};
    iovec iov{const_cast<char*>(p), bytes};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerSend)];
    if (!fds_sent) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fd_count);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fd_count);
      std::memcpy(CMSG_DATA(c), fds, sizeof(int) * fd_count);
    }
    ssize_t n = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("sending to the other ferryd", errno);
    }
    fds_sent = true;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void Channel::receive_all(void* data, std::size_t bytes, std::vector<UniqueFd>* fds,
                          std::chrono::steady_clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) fail("the other ferryd did not answer in time");
    // Rounded up: a wait rounded down to 0 ms would give up before the deadline.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    pollfd pfd{socket_.get(), POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) fail("waiting for the other ferryd", errno);
    if (ready <= 0) continue;
    msghdr msg{};
    iovec iov{p, bytes};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerSend)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(socket_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail("receiving from the other ferryd", errno);
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (fds) {
          fds->emplace_back(fd);
        } else {
          ::close(fd);  // none expected here: never leak what the peer sent
        }
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) fail("the other ferryd sent more fds than expected");
    if (n == 0) fail("the other ferryd closed the handover connection");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void Channel::send(const nlohmann::json& head, const std::vector<std::byte>& body,
                   const std::vector<int>& fds) {
  std::string text = head.dump();
  Header h{kMagic, static_cast<std::uint32_t>(text.size()), static_cast<std::uint32_t>(body.size()),
           static_cast<std::uint32_t>(fds.size())};
  std::size_t first = std::min(fds.size(), kFdsPerSend);
  send_all(&h, sizeof(h), fds.data(), first);
  for (std::size_t i = first; i < fds.size(); i += kFdsPerSend) {
    char one = 0;
    send_all(&one, 1, fds.data() + i, std::min(kFdsPerSend, fds.size() - i));
  }
  send_all(text.data(), text.size(), nullptr, 0);
  if (!body.empty()) send_all(body.data(), body.size(), nullptr, 0);
}

Message Channel::receive(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Message m;
  Header h{};
  receive_all(&h, sizeof(h), &m.fds, deadline);
  if (h.magic != kMagic || h.head_bytes > kMaxHeadBytes || h.body_bytes > kMaxBodyBytes ||
      h.fd_count > kMaxFds) {
    fail("the other ferryd sent a malformed handover frame");
  }
  while (m.fds.size() < h.fd_count) {
    char one;
    receive_all(&one, 1, &m.fds, deadline);
  }
  if (m.fds.size() != h.fd_count) fail("the other ferryd sent more fds than it announced");
  std::string text(h.head_bytes, '\0');
  receive_all(text.data(), text.size(), nullptr, deadline);
  m.body.resize(h.body_bytes);
  if (h.body_bytes) receive_all(m.body.data(), m.body.size(), nullptr, deadline);
  try {
    m.head = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("the other ferryd sent a malformed handover message: ") + e.what());
  }
  if (!m.head.is_object()) fail("the other ferryd sent a handover message that is not an object");
  if (m.head.contains("error") && m.head["error"].is_string()) {
    throw ChannelError(m.head["error"].get<std::string>());
  }
  return m;
}

}  // namespace ferry::handover
