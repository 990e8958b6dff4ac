// What a handover carries of the fast path: the workers' carries as bytes and back (and every
// malformed body refused), and the kernel objects' description with its fds, memfds standing in
// for the AF_XDP sockets.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/fastpath/fastpath_handover.hh"

namespace ferry::fastpath {
namespace {

using nlohmann::json;

FlowEntry entry(std::uint8_t n) {
  FlowEntry e;
  for (std::size_t i = 0; i < 16; ++i) {
    e.src_address[i] = static_cast<std::uint8_t>(n + i);
    e.dst_address[i] = static_cast<std::uint8_t>(0x80 + n + i);
    e.backend_address[i] = static_cast<std::uint8_t>(0x40 + n * 3 + i);
  }
  e.ports_protocol = 0x0411'0035'9c40ull + n;
  e.backend_port = static_cast<std::uint16_t>(5300 + n);
  e.backend_index = n % 4;
  e.last_seen_ms = 1'000'000u + n;
  return e;
}

std::vector<WorkerCarry> three_workers() {
  std::vector<WorkerCarry> carries(3);
  carries[0].queue = 0;
  carries[0].free_frames = {0, 2048, 8192, 4096};
  carries[0].flows.capacity = 64;
  carries[0].flows.slots = {3, 17, 63};
  carries[0].flows.tags = {0x11, 0xfe, 1};
  carries[0].flows.entries = {entry(1), entry(2), entry(3)};
  carries[1].queue = 5;  // no free frame, no flow table
  carries[2].queue = 2;
  for (std::uint64_t f = 0; f < 1000; ++f) carries[2].free_frames.push_back((512 + f) * 2048);
  carries[2].flows.capacity = 1u << 16;
  carries[2].flows.slots = {65535};
  carries[2].flows.tags = {0x80};
  carries[2].flows.entries = {entry(200)};
  return carries;
}

void expect_same(const std::vector<WorkerCarry>& got, const std::vector<WorkerCarry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t w = 0; w < want.size(); ++w) {
    SCOPED_TRACE(testing::Message() << "worker " << w);
    EXPECT_EQ(got[w].queue, want[w].queue);
    EXPECT_EQ(got[w].free_frames, want[w].free_frames);
    EXPECT_EQ(got[w].flows.capacity, want[w].flows.capacity);
    EXPECT_EQ(got[w].flows.slots, want[w].flows.slots);
    EXPECT_EQ(got[w].flows.tags, want[w].flows.tags);
    ASSERT_EQ(got[w].flows.entries.size(), want[w].flows.entries.size());
    for (std::size_t i = 0; i < want[w].flows.entries.size(); ++i) {
      const FlowEntry& a = got[w].flows.entries[i];
      const FlowEntry& b = want[w].flows.entries[i];
      EXPECT_EQ(a.src_address, b.src_address);
      EXPECT_EQ(a.dst_address, b.dst_address);
      EXPECT_EQ(a.ports_protocol, b.ports_protocol);
      EXPECT_EQ(a.backend_address, b.backend_address);
      EXPECT_EQ(a.backend_port, b.backend_port);
      EXPECT_EQ(a.backend_index, b.backend_index);
      EXPECT_EQ(a.last_seen_ms, b.last_seen_ms);
    }
  }
}

TEST(FastpathCarry, PackThenUnpackGivesBackEveryWorkersCarry) {
  const std::vector<WorkerCarry> carries = three_workers();
  std::vector<std::byte> bytes = pack(carries);
  expect_same(unpack(bytes), carries);
}

TEST(FastpathCarry, NoWorkersPackToACountOfZero) {
  std::vector<std::byte> bytes = pack(std::span<const WorkerCarry>{});
  EXPECT_EQ(bytes.size(), 4u);
  EXPECT_TRUE(unpack(bytes).empty());
}

TEST(FastpathCarry, EveryTruncationIsRefused) {
  const std::vector<std::byte> bytes = pack(three_workers());
  // Every cut: in a count, inside a free stack, inside a flow entry, the last byte.
  for (std::size_t size = 0; size < bytes.size(); size += (size < 256 ? 1 : 509)) {
    SCOPED_TRACE(size);
    EXPECT_THROW(unpack(std::span(bytes).first(size)), std::invalid_argument);
  }
  EXPECT_THROW(unpack(std::span(bytes).first(bytes.size() - 1)), std::invalid_argument);
}

TEST(FastpathCarry, TrailingBytesAreRefused) {
  std::vector<std::byte> bytes = pack(three_workers());
  bytes.push_back(std::byte{0});
  EXPECT_THROW(unpack(bytes), std::invalid_argument);
}

TEST(FastpathCarry, AbsurdCountsAreRefusedBeforeAnythingIsAllocated) {
  auto with_u32 = [](std::vector<std::byte> bytes, std::size_t at, std::uint32_t value) {
    std::memcpy(bytes.data() + at, &value, sizeof value);
    return bytes;
  };
  const std::vector<std::byte> one = pack(std::vector<WorkerCarry>(1));
  // Layout of one empty carry: workers, queue, free count, capacity, slots, tags, entries.
  ASSERT_EQ(one.size(), 7u * 4);
  EXPECT_NO_THROW(unpack(one));
  EXPECT_THROW(unpack(with_u32(one, 0, 4097)), std::invalid_argument) << "workers";
  EXPECT_THROW(unpack(with_u32(one, 0, 0xffffffff)), std::invalid_argument) << "workers";
  EXPECT_THROW(unpack(with_u32(one, 8, 0xffffffff)), std::invalid_argument) << "free frames";
  EXPECT_THROW(unpack(with_u32(one, 16, 0x40000000)), std::invalid_argument) << "slots";
  EXPECT_THROW(unpack(with_u32(one, 20, 1000)), std::invalid_argument) << "tags";
  EXPECT_THROW(unpack(with_u32(one, 24, 0xffffffff)), std::invalid_argument) << "entries";
}

// A memfd with its own inode: what an AF_XDP socket fd is to describe() and handed_over_from().
UniqueFd stand_in(const char* name) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  if (!fd) throw std::runtime_error("memfd_create");
  return fd;
}

ino_t inode_of(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return st.st_ino;
}

xsk::HandedOverSocket socket_of(const char* ifname, int ifindex, std::uint32_t queue, bool shared) {
  xsk::HandedOverSocket s;
  s.fd = stand_in(ifname);
  s.ifname = ifname;
  s.ifindex = ifindex;
  s.queue = queue;
  s.rx_entries = 2048 + queue;
  s.tx_entries = 1024 + queue;
  s.fill_entries = 4096 + queue;
  s.completion_entries = 512 + queue;
  s.info.flags = shared ? 1 : 8;
  s.info.shared_umem = shared;
  s.info.zerocopy = !shared;
  s.info.need_wakeup = queue % 2 == 1;
  return s;
}

HandedOverFastpath two_workers_two_ports() {
  HandedOverFastpath h;
  h.umem.frame_count = 8192;
  h.umem.frame_bytes = 4096;
  h.umem.headroom_bytes = 256;
  h.umem.fill_entries = 2048;
  h.umem.completion_entries = 1024;
  h.hugepages = true;
  h.memfd = stand_in("umem");
  h.sockets.resize(2);
  h.sockets[0].push_back(socket_of("eth0", 2, 0, false));
  h.sockets[0].push_back(socket_of("eth1", 3, 0, true));
  h.sockets[1].push_back(socket_of("eth0", 2, 1, false));
  h.sockets[1].push_back(socket_of("eth1", 3, 1, true));
  return h;
}

// What the peer receives: its own copies of the fds, in order.
std::vector<UniqueFd> copies_of(const std::vector<int>& fds) {
  std::vector<UniqueFd> out;
  for (int fd : fds) out.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  return out;
}

TEST(FastpathHandover, TheDescriptionRoundTripsEveryFieldAndFd) {
  const HandedOverFastpath sent = two_workers_two_ports();
  std::vector<int> fds;
  json description = describe(sent, fds);
  ASSERT_EQ(fds.size(), 5u) << "the memfd and four sockets";
  EXPECT_EQ(fds[0], sent.memfd.get()) << "memfd first";
  EXPECT_EQ(fds[1], sent.sockets[0][0].fd.get());
  EXPECT_EQ(fds[2], sent.sockets[0][1].fd.get());
  EXPECT_EQ(fds[3], sent.sockets[1][0].fd.get());
  EXPECT_EQ(fds[4], sent.sockets[1][1].fd.get());

  std::vector<UniqueFd> received = copies_of(fds);
  // Over the wire as text, as the channel carries it.
  HandedOverFastpath got = handed_over_from(json::parse(description.dump()), received);

  EXPECT_EQ(got.umem.frame_count, 8192u);
  EXPECT_EQ(got.umem.frame_bytes, 4096u);
  EXPECT_EQ(got.umem.headroom_bytes, 256u);
  EXPECT_EQ(got.umem.fill_entries, 2048u);
  EXPECT_EQ(got.umem.completion_entries, 1024u);
  EXPECT_TRUE(got.hugepages);
  ASSERT_TRUE(got.memfd);
  EXPECT_EQ(inode_of(got.memfd.get()), inode_of(sent.memfd.get()));
  ASSERT_EQ(got.sockets.size(), 2u);
  for (std::size_t w = 0; w < 2; ++w) {
    ASSERT_EQ(got.sockets[w].size(), 2u);
    for (std::size_t p = 0; p < 2; ++p) {
      SCOPED_TRACE(testing::Message() << "worker " << w << " port " << p);
      const xsk::HandedOverSocket& a = got.sockets[w][p];
      const xsk::HandedOverSocket& b = sent.sockets[w][p];
      ASSERT_TRUE(a.fd);
      EXPECT_EQ(inode_of(a.fd.get()), inode_of(b.fd.get()));
      EXPECT_EQ(a.ifname, b.ifname);
      EXPECT_EQ(a.ifindex, b.ifindex);
      EXPECT_EQ(a.queue, b.queue);
      EXPECT_EQ(a.rx_entries, b.rx_entries);
      EXPECT_EQ(a.tx_entries, b.tx_entries);
      EXPECT_EQ(a.fill_entries, b.fill_entries);
      EXPECT_EQ(a.completion_entries, b.completion_entries);
      EXPECT_EQ(a.info.flags, b.info.flags);
      EXPECT_EQ(a.info.shared_umem, b.info.shared_umem);
      EXPECT_EQ(a.info.zerocopy, b.info.zerocopy);
      EXPECT_EQ(a.info.need_wakeup, b.info.need_wakeup);
    }
  }
  for (const UniqueFd& fd : received) EXPECT_FALSE(fd) << "every fd was taken by the state";
}

TEST(FastpathHandover, IndicesCountFromTheFdsAlreadyInTheMessage) {
  // The fast path's fds follow the listeners' in one message.
  const HandedOverFastpath sent = two_workers_two_ports();
  UniqueFd listener = stand_in("listener");
  std::vector<int> fds = {listener.get()};
  json description = describe(sent, fds);
  ASSERT_EQ(fds.size(), 6u);
  EXPECT_EQ(description["memfd"], 1);
  EXPECT_EQ(description["workers"][1][1]["fd"], 5);
  std::vector<UniqueFd> received = copies_of(fds);
  HandedOverFastpath got = handed_over_from(description, received);
  EXPECT_EQ(inode_of(got.memfd.get()), inode_of(sent.memfd.get()));
  EXPECT_EQ(inode_of(got.sockets[1][1].fd.get()), inode_of(sent.sockets[1][1].fd.get()));
  EXPECT_TRUE(received[0]) << "the listener's fd is not the fast path's";
}

TEST(FastpathHandover, AMissingOrReusedFdIndexIsRefused) {
  const HandedOverFastpath sent = two_workers_two_ports();
  std::vector<int> fds;
  const json description = describe(sent, fds);

  json socket_past_end = description;
  socket_past_end["workers"][1][0]["fd"] = 5;
  json memfd_past_end = description;
  memfd_past_end["memfd"] = 99;
  json reused = description;
  reused["workers"][1][1]["fd"] = 1;  // the first socket's, already taken
  json no_fd = description;
  no_fd["workers"][0][1].erase("fd");
  json negative = description;
  negative["workers"][0][0]["fd"] = -1;
  json no_workers = description;
  no_workers.erase("workers");
  json no_frames = description;
  no_frames.erase("frames");
  for (const auto& [what, d] :
       {std::pair{"socket fd past the end", &socket_past_end},
        std::pair{"memfd past the end", &memfd_past_end}, std::pair{"fd used twice", &reused},
        std::pair{"no fd", &no_fd}, std::pair{"negative fd", &negative},
        std::pair{"no workers", &no_workers}, std::pair{"no frames", &no_frames}}) {
    SCOPED_TRACE(what);
    std::vector<UniqueFd> received = copies_of(fds);
    EXPECT_THROW(handed_over_from(*d, received), std::invalid_argument);
  }
  std::vector<UniqueFd> too_few = copies_of(fds);
  too_few.pop_back();
  EXPECT_THROW(handed_over_from(description, too_few), std::invalid_argument);
}

}  // namespace
}  // namespace ferry::fastpath
