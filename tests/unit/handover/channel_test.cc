// The handover's wire over a socketpair: heads, bulk bodies and fds round-trip, hundreds of fds
// arrive in order, and an error head, a vanished peer, a garbage frame or silence each end in a
// ChannelError without leaking a received fd.
#include "lib/handover/channel.hh"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace ferry::handover {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// The frame header as channel.cc writes it: magic "fry1", head bytes, body bytes, fd count.
struct RawHeader {
  std::uint32_t magic;
  std::uint32_t head_bytes;
  std::uint32_t body_bytes;
  std::uint32_t fd_count;
};
constexpr std::uint32_t kMagic = 0x66727931;

struct SocketPair {
  SocketPair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    }
    a.reset(sv[0]);
    b.reset(sv[1]);
  }
  UniqueFd a;
  UniqueFd b;
};

std::size_t open_fd_count() {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

// Writes `bytes` on `fd` with `fds` attached, as a peer that does not use Channel would.
void raw_send(int fd, const void* bytes, std::size_t size, const std::vector<int>& fds = {}) {
  msghdr msg{};
  iovec iov{const_cast<void*>(bytes), size};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ASSERT_EQ(::sendmsg(fd, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(size)) << std::strerror(errno);
}

std::string receive_error(Channel& channel, std::chrono::milliseconds timeout = 5s) {
  try {
    channel.receive(timeout);
  } catch (const ChannelError& e) {
    return e.what();
  }
  ADD_FAILURE() << "receive() returned a message";
  return {};
}

TEST(HandoverChannel, AHeadABodyOfMegabytesAndFdsRoundTrip) {
  SocketPair pair;
  Channel sender(std::move(pair.a));
  Channel receiver(std::move(pair.b));

  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd pipe_read(p[0]);
  UniqueFd pipe_write(p[1]);
  UniqueFd memfd(::memfd_create("channel-test", MFD_CLOEXEC));
  ASSERT_TRUE(memfd);

  std::vector<std::byte> body(5u << 20);  // far more than the socket buffer: many writes
  for (std::size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<std::byte>((i * 131 + i / 4096) & 0xff);
  }
  json head = {{"kind", "offer"}, {"workers", json::array({1, 2, 3})}, {"name", "ferryd"}};

  std::thread send_thread([&] {
    sender.send(head, body, {pipe_write.get(), memfd.get(), pipe_read.get()});
  });
  Message m = receiver.receive(10s);
  send_thread.join();

  EXPECT_EQ(m.head, head);
  ASSERT_EQ(m.body.size(), body.size());
  EXPECT_TRUE(m.body == body) << "the body arrives byte for byte";
  ASSERT_EQ(m.fds.size(), 3u);
  for (const UniqueFd& fd : m.fds) {
    ASSERT_TRUE(fd);
    EXPECT_EQ(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC) << "received close-on-exec";
  }

  // The received pipe write end is the same pipe: what goes in there comes out of the original.
  const char note[] = "through the copy";
  ASSERT_EQ(::write(m.fds[0].get(), note, sizeof note), static_cast<ssize_t>(sizeof note));
  char got[sizeof note] = {};
  ASSERT_EQ(::read(pipe_read.get(), got, sizeof got), static_cast<ssize_t>(sizeof note));
  EXPECT_STREQ(got, note);

  struct stat original {
  }, copy{};
  ASSERT_EQ(::fstat(memfd.get(), &original), 0);
  ASSERT_EQ(::fstat(m.fds[1].get(), &copy), 0);
  EXPECT_EQ(copy.st_ino, original.st_ino);
  EXPECT_EQ(copy.st_dev, original.st_dev);
  ASSERT_EQ(::fstat(pipe_read.get(), &original), 0);
  ASSERT_EQ(::fstat(m.fds[2].get(), &copy), 0);
  EXPECT_EQ(copy.st_ino, original.st_ino);
  // The sender's fds stay open on its side.
  EXPECT_GE(::fcntl(pipe_write.get(), F_GETFD), 0);
}

TEST(HandoverChannel, MessagesWithoutBodyOrFdsFollowEachOtherOnOneConnection) {
  SocketPair pair;
  Channel sender(std::move(pair.a));
  Channel receiver(std::move(pair.b));
  sender.send({{"n", 1}});
  sender.send({{"n", 2}}, {std::byte{7}});
  Message first = receiver.receive(5s);
  Message second = receiver.receive(5s);
  EXPECT_EQ(first.head, json({{"n", 1}}));
  EXPECT_TRUE(first.body.empty());
  EXPECT_TRUE(first.fds.empty());
  EXPECT_EQ(second.head, json({{"n", 2}}));
  ASSERT_EQ(second.body.size(), 1u);
  EXPECT_EQ(second.body[0], std::byte{7});
}

TEST(HandoverChannel, MoreFdsThanOneSendmsgCarriesArriveAllAndInOrder) {
  // 600 sent, 600 received, and the rest of the process: more than a 1024 soft limit.
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur < 4096 && limit.rlim_max > limit.rlim_cur) {
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 4096);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  }

  constexpr int kFds = 600;
  std::vector<UniqueFd> originals;
  std::vector<int> raw;
  for (int i = 0; i < kFds; ++i) {
    // Each eventfd's counter says which it is (eventfds share one anonymous inode).
    originals.emplace_back(::eventfd(static_cast<unsigned>(i + 1), EFD_CLOEXEC));
    ASSERT_TRUE(originals.back());
    raw.push_back(originals.back().get());
  }
  SocketPair pair;
  Channel sender(std::move(pair.a));
  Channel receiver(std::move(pair.b));
  std::thread send_thread([&] { sender.send({{"fds", kFds}}, {}, raw); });
  Message m = receiver.receive(10s);
  send_thread.join();

  EXPECT_EQ(m.head["fds"], kFds);
  ASSERT_EQ(m.fds.size(), static_cast<std::size_t>(kFds));
  for (int i = 0; i < kFds; ++i) {
    std::uint64_t value = 0;
    ASSERT_EQ(::read(m.fds[i].get(), &value, sizeof value), 8) << i;
    ASSERT_EQ(value, static_cast<std::uint64_t>(i + 1)) << "fd " << i << " out of order";
  }
}

TEST(HandoverChannel, AnErrorHeadThrowsItsReason) {
  SocketPair pair;
  Channel sender(std::move(pair.a));
  Channel receiver(std::move(pair.b));
  sender.send({{"error", "why"}});
  EXPECT_EQ(receive_error(receiver), "why");
}

TEST(HandoverChannel, APeerThatClosesMidFrameFailsTheReceiveAndLeaksNoFd) {
  const std::size_t before = open_fd_count();
  {
    SocketPair pair;
    Channel receiver(std::move(pair.b));
    {
      int p[2];
      ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
      UniqueFd r(p[0]), w(p[1]);
      // A header that promises a 100-byte head, with its two fds, then 10 bytes of the head.
      RawHeader h{kMagic, 100, 0, 2};
      raw_send(pair.a.get(), &h, sizeof h, {r.get(), w.get()});
      raw_send(pair.a.get(), "{\"partial\"", 10);
    }
    pair.a.reset();
    std::string error = receive_error(receiver);
    EXPECT_NE(error.find("closed"), std::string::npos) << error;
  }
  EXPECT_EQ(open_fd_count(), before);
}

TEST(HandoverChannel, APeerThatClosesBeforeAllAnnouncedFdsCameFailsAndLeaksNoFd) {
  const std::size_t before = open_fd_count();
  {
    SocketPair pair;
    Channel receiver(std::move(pair.b));
    {
      UniqueFd e(::eventfd(0, EFD_CLOEXEC));
      RawHeader h{kMagic, 2, 0, 300};  // 300 announced, one came
      raw_send(pair.a.get(), &h, sizeof h, {e.get()});
    }
    pair.a.reset();
    std::string error = receive_error(receiver);
    EXPECT_NE(error.find("closed"), std::string::npos) << error;
  }
  EXPECT_EQ(open_fd_count(), before);
}

TEST(HandoverChannel, AHalfHeaderThenCloseFails) {
  SocketPair pair;
  Channel receiver(std::move(pair.b));
  RawHeader h{kMagic, 2, 0, 0};
  raw_send(pair.a.get(), &h, 8);
  pair.a.reset();
  EXPECT_NE(receive_error(receiver).find("closed"), std::string::npos);
}

TEST(HandoverChannel, MoreFdsThanAnnouncedAreRefusedAndClosed) {
  const std::size_t before = open_fd_count();
  {
    SocketPair pair;
    Channel receiver(std::move(pair.b));
    {
      UniqueFd e1(::eventfd(0, EFD_CLOEXEC)), e2(::eventfd(0, EFD_CLOEXEC));
      RawHeader h{kMagic, 2, 0, 1};
      raw_send(pair.a.get(), &h, sizeof h, {e1.get(), e2.get()});
      raw_send(pair.a.get(), "{}", 2);
    }
    EXPECT_NE(receive_error(receiver).find("more fds than it announced"), std::string::npos);
  }
  EXPECT_EQ(open_fd_count(), before);
}

TEST(HandoverChannel, AWrongMagicIsAMalformedFrame) {
  SocketPair pair;
  Channel receiver(std::move(pair.b));
  RawHeader h{0x47455420, 2, 0, 0};  // "GET ": someone else's protocol
  raw_send(pair.a.get(), &h, sizeof h);
  raw_send(pair.a.get(), "{}", 2);
  EXPECT_NE(receive_error(receiver).find("malformed handover frame"), std::string::npos);
}

TEST(HandoverChannel, AbsurdLengthsAreAMalformedFrame) {
  for (RawHeader h : {RawHeader{kMagic, (16u << 20) + 1, 0, 0},
                      RawHeader{kMagic, 2, (1u << 30) + 1, 0}, RawHeader{kMagic, 2, 0, 65537}}) {
    SCOPED_TRACE(testing::Message() << h.head_bytes << " " << h.body_bytes << " " << h.fd_count);
    SocketPair pair;
    Channel receiver(std::move(pair.b));
    raw_send(pair.a.get(), &h, sizeof h);
    EXPECT_NE(receive_error(receiver).find("malformed handover frame"), std::string::npos);
  }
}

TEST(HandoverChannel, AHeadThatIsNotAJsonObjectIsRefused) {
  for (auto [text, why] : {std::pair<std::string, std::string>{"[1,2]", "is not an object"},
                           {"{not json", "malformed handover message"}}) {
    SCOPED_TRACE(text);
    SocketPair pair;
    Channel receiver(std::move(pair.b));
    RawHeader h{kMagic, static_cast<std::uint32_t>(text.size()), 0, 0};
    raw_send(pair.a.get(), &h, sizeof h);
    raw_send(pair.a.get(), text.data(), text.size());
    std::string error = receive_error(receiver);
    EXPECT_NE(error.find(why), std::string::npos) << error;
  }
}

TEST(HandoverChannel, SilenceTimesOutNoSoonerThanTheTimeout) {
  SocketPair pair;
  Channel receiver(std::move(pair.b));
  constexpr auto kTimeout = 150ms;
  auto start = std::chrono::steady_clock::now();
  std::string error = receive_error(receiver, kTimeout);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(error.find("did not answer in time"), std::string::npos) << error;
  EXPECT_GE(took, kTimeout);
  EXPECT_LT(took, kTimeout + 5s);
}

TEST(HandoverChannel, AMessageAlreadyQueuedIsReadEvenUnderAOneMillisecondTimeout) {
  SocketPair pair;
  Channel sender(std::move(pair.a));
  Channel receiver(std::move(pair.b));
  sender.send({{"n", 1}});
  Message m;
  EXPECT_NO_THROW(m = receiver.receive(1ms)) << "the message was there before receive() began";
  EXPECT_EQ(m.head, json({{"n", 1}}));
}

TEST(HandoverChannel, SendingToAPeerThatIsGoneThrows) {
  SocketPair pair;
  Channel sender(std::move(pair.a));
  pair.b.reset();
  EXPECT_THROW(sender.send({{"n", 1}}), ChannelError);
}

}  // namespace
}  // namespace ferry::handover
