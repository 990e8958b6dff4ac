// What a handover carries of the fast path: the workers' carries as bytes and back (and every
// malformed body refused), and the kernel objects as the fast path's part of a handover offer,
// fds by name, memfds standing in for the AF_XDP sockets.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/fastpath/fastpath_handover.hh"
#include "tests/unit/support/handover_support.hh"

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

using test::inode_of;
using test::stand_in;

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

// A copy to describe (which consumes it), its fds duplicates of `h`'s (the same inodes).
HandedOverFastpath copy_of(const HandedOverFastpath& h) {
  HandedOverFastpath out;
  out.umem = h.umem;
  out.hugepages = h.hugepages;
  out.memfd = duplicate_fd(h.memfd.get());
  for (const auto& ports : h.sockets) {
    out.sockets.emplace_back();
    for (const xsk::HandedOverSocket& s : ports) {
      xsk::HandedOverSocket c{duplicate_fd(s.fd.get()),
                              s.ifname,
                              s.ifindex,
                              s.queue,
                              s.rx_entries,
                              s.tx_entries,
                              s.fill_entries,
                              s.completion_entries,
                              s.info};
      out.sockets.back().push_back(std::move(c));
    }
  }
  return out;
}

handover::Offer over_the_wire(const handover::Offer& offer) {
  return test::over_the_wire(offer, "offer");
}

TEST(FastpathHandover, ThePartRoundTripsEveryFieldAndFdByName) {
  const HandedOverFastpath sent = two_workers_two_ports();
  handover::Offer offer;
  describe(copy_of(sent), offer.part("fastpath"));
  const handover::OfferPart& written = offer.part("fastpath");
  ASSERT_EQ(written.fd_count(), 5u) << "the memfd and four sockets";
  for (const char* name : {"umem", "xsk:0:0", "xsk:0:1", "xsk:1:0", "xsk:1:1"}) {
    EXPECT_TRUE(written.fds().contains(name)) << name;
  }

  handover::OfferPart part = over_the_wire(offer).take_part("fastpath");
  HandedOverFastpath got = handed_over_from(part);

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
  EXPECT_EQ(part.fd_count(), 0u) << "every fd was taken by the state";
}

TEST(FastpathHandover, AnotherPlanesFdsInTheSameOfferAreNotTheFastPaths) {
  const HandedOverFastpath sent = two_workers_two_ports();
  handover::Offer offer;
  offer.part("tcp").put_fd("listener", stand_in("listener"));
  describe(copy_of(sent), offer.part("fastpath"));
  handover::Offer received = over_the_wire(offer);
  handover::OfferPart part = received.take_part("fastpath");
  HandedOverFastpath got = handed_over_from(part);
  EXPECT_EQ(inode_of(got.memfd.get()), inode_of(sent.memfd.get()));
  EXPECT_EQ(inode_of(got.sockets[1][1].fd.get()), inode_of(sent.sockets[1][1].fd.get()));
  EXPECT_EQ(received.take_part("tcp").fd_count(), 1u) << "the listener stays the TCP part's";
}

TEST(FastpathHandover, AMissingFdOrFieldIsRefused) {
  const HandedOverFastpath sent = two_workers_two_ports();
  for (const char* what : {"xsk:1:0", "umem", "workers", "frames"}) {
    SCOPED_TRACE(what);
    handover::OfferPart part;
    describe(copy_of(sent), part);
    if (!part.take_fd(what)) part.fields.erase(what);
    EXPECT_THROW(handed_over_from(part), std::invalid_argument);
  }
}

}  // namespace
}  // namespace ferry::fastpath
