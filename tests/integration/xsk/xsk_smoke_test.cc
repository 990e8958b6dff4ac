// Root AF_XDP smoke test: in a private netns, a 2-queue veth pair, a test XDP program redirecting
// every frame to its queue's socket, one XSK per queue sharing one UMEM. UDP datagrams from the
// peer are reflected back by per-queue workers; afterwards every slab's frames are accounted for
// exactly, and teardown leaves no socket, ring mapping or program behind.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "lib/xsk/frame_account.hh"
#include "lib/xsk/recycle.hh"
#include "lib/xsk/shared_umem.hh"
#include "lib/xsk/wakeup.hh"
#include "tests/integration/xsk/netns_lab.hh"
#include "xsk_redirect.skel.h"

namespace ferry::xsk {
namespace {

using namespace std::chrono_literals;

const std::string kInnerIp = "10.99.0.1";
const std::string kOuterIp = "10.99.0.2";

// The test XDP program, attached to an interface through a bpf_link (detached when destroyed).
class RedirectProgram {
 public:
  explicit RedirectProgram(int ifindex) : skel_(xsk_redirect_bpf__open_and_load()) {
    if (!skel_) throw std::runtime_error("loading the test XDP program failed");
    link_ = bpf_program__attach_xdp(skel_->progs.redirect_to_xsk, ifindex);
    if (!link_) {
      xsk_redirect_bpf__destroy(skel_);
      throw std::runtime_error("attaching the test XDP program failed");
    }
  }
  ~RedirectProgram() {
    bpf_link__destroy(link_);
    xsk_redirect_bpf__destroy(skel_);
  }
  void insert(const XskSocket& socket) {
    std::uint32_t queue = socket.queue();
    int fd = socket.fd();
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.xsks), &queue, &fd, 0) != 0) {
      throw std::system_error(errno, std::generic_category(), "XSKMAP update");
    }
  }

 private:
  xsk_redirect_bpf* skel_;
  bpf_link* link_ = nullptr;
};

// Frames are read byte-wise: headers in a frame are not aligned for the kernel structs.
std::uint16_t load16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
void store16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void swap_bytes(std::uint8_t* a, std::uint8_t* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) std::swap(a[i], b[i]);
}

// Full UDP checksum over the IPv4 pseudo header: frames sent by the peer's stack over veth carry
// only a partial one (checksum offload), which the peer would reject once reflected.
std::uint16_t udp_checksum(const std::uint8_t* ip, const std::uint8_t* udp, std::uint32_t bytes) {
  std::uint64_t sum = 0;
  for (int i = 12; i < 20; i += 2) sum += load16(ip + i);  // source and destination address
  sum += IPPROTO_UDP + bytes;
  for (std::uint32_t i = 0; i + 1 < bytes; i += 2) sum += load16(udp + i);
  if (bytes & 1) sum += udp[bytes - 1] << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  std::uint16_t c = static_cast<std::uint16_t>(~sum);
  return c == 0 ? 0xffff : c;
}

// Swaps Ethernet, IPv4 and UDP source and destination in place; false for anything else.
bool reflect_udp(std::byte* frame_bytes, std::uint32_t len) {
  auto* eth = reinterpret_cast<std::uint8_t*>(frame_bytes);
  if (len < ETH_HLEN + 20 + 8 || load16(eth + 12) != ETH_P_IP) return false;
  std::uint8_t* ip = eth + ETH_HLEN;
  std::uint32_t ihl_bytes = (ip[0] & 0x0f) * 4u;
  if (ip[9] != IPPROTO_UDP || ihl_bytes < 20 || len < ETH_HLEN + ihl_bytes + 8) return false;
  std::uint8_t* udp = ip + ihl_bytes;
  std::uint32_t udp_bytes = load16(udp + 4);
  if (udp_bytes < 8 || ETH_HLEN + ihl_bytes + udp_bytes > len) return false;
  swap_bytes(eth, eth + ETH_ALEN, ETH_ALEN);
  swap_bytes(ip + 12, ip + 16, 4);
  swap_bytes(udp, udp + 2, 2);
  store16(udp + 6, 0);
  store16(udp + 6, udp_checksum(ip, udp, udp_bytes));
  return true;
}

// One queue's worker, the shape ferry's workers take: refill, rx burst, process in place, tx
// burst, kick, recycle; bounded spin, then sleep in poll().
class Reflector {
 public:
  Reflector(XskSocket& socket, UmemSlab& slab, int stop_fd)
      : socket_(socket), slab_(slab), rings_(socket.rings()), stop_fd_(stop_fd) {
    // Populated before the socket goes into the XSKMAP, so the first frame finds a buffer.
    refill(rings_.fill, slab_, rings_.fill.capacity());
  }

  void run(const std::atomic<bool>& stop) {
    IdleSpin idle(200);
    auto drain_deadline = std::chrono::steady_clock::time_point::max();
    for (;;) {
      bool work = burst();
      std::uint32_t in_flight = rings_.tx.producer_word() - rings_.completion.producer_word();
      if (in_flight > 0 &&
          kick_tx(socket_.fd(), rings_.tx, socket_.bind_info().need_wakeup) != Wakeup::not_needed) {
        ++tx_kicks;
      }
      // Completions first, straight into the fill ring; the slab only tops up what is missing.
      RecycleResult r = recycle_completions(rings_.completion, rings_.fill, slab_);
      recycled_to_fill += r.to_fill;
      recycled_to_slab += r.to_slab;
      rejected += r.rejected;
      work = work || r.to_fill + r.to_slab > 0;
      refill(rings_.fill, slab_, rings_.fill.capacity());
      if (stop.load(std::memory_order_acquire)) {
        if (drain_deadline == std::chrono::steady_clock::time_point::max()) {
          drain_deadline = std::chrono::steady_clock::now() + 5s;
        }
        in_flight = rings_.tx.producer_word() - rings_.completion.producer_word();
        bool completions_left =
            rings_.completion.producer_word() != rings_.completion.consumer_word();
        if ((in_flight == 0 && !completions_left) ||
            std::chrono::steady_clock::now() > drain_deadline) {
          return;
        }
        continue;
      }
      if (in_flight == 0 && idle.should_sleep(work)) {
        pollfd fds[] = {{socket_.fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
        wait_for_rx(fds, 100);
        ++sleeps;
      }
    }
  }

  std::uint64_t rx_packets = 0, tx_packets = 0, dropped = 0, rejected = 0;
  std::uint64_t recycled_to_fill = 0, recycled_to_slab = 0;
  std::uint64_t tx_kicks = 0, sleeps = 0;

 private:
  bool burst() {
    RingSlices<const xdp_desc> got = rings_.rx.peek(64);
    if (got.empty()) return false;
    RingSlices<xdp_desc> slots = rings_.tx.reserve(got.size());
    std::uint64_t drops[64];
    std::uint32_t out = 0, ndrops = 0;
    for (std::uint32_t i = 0; i < got.size(); ++i) {
      const xdp_desc& d = got[i];
      std::byte* frame = slab_.packet(d.addr, d.len);
      if (frame && reflect_udp(frame, d.len) && out < slots.size()) {
        slots[out++] = d;
      } else {
        drops[ndrops++] = d.addr;
      }
    }
    rings_.tx.cancel(slots.size() - out);
    rings_.tx.submit(out);
    SlabFreeResult f = slab_.free({drops, ndrops});
    rejected += f.outside_slab + f.double_free;
    rings_.rx.release(got.size());
    rx_packets += got.size();
    tx_packets += out;
    dropped += ndrops;
    return true;
  }

  XskSocket& socket_;
  UmemSlab& slab_;
  QueueRings rings_;
  int stop_fd_;
};

std::string payload_for(int sock, int seq) {
  std::string p = "ferry-xsk " + std::to_string(sock) + " " + std::to_string(seq) + " ";
  std::size_t size = 20 + (static_cast<std::size_t>(sock) * 131 + seq * 977) % 1380;
  while (p.size() < size) p.push_back(static_cast<char>('a' + (p.size() * 7 + seq) % 26));
  return p;
}

// Every AF_XDP socket still open in this process.
int open_xdp_sockets() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* e = readdir(dir)) {
    int fd = std::atoi(e->d_name);
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (fd > 2 && getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_XDP) {
      ++count;
    }
  }
  closedir(dir);
  return count;
}

// Ring mappings of sockets still in this process's address space.
int socket_mappings() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);)
    count += line.find("socket:[") != std::string::npos;
  return count;
}

class XskSmoke : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tag = std::to_string(getpid() % 100000) + std::to_string(counter_++);
    veth_ = std::make_unique<test::VethPair>("fxi" + tag, "fxo" + tag, 2, kInnerIp, kOuterIp);
  }
  void TearDown() override {
    veth_.reset();
    EXPECT_EQ(open_xdp_sockets(), 0);
    EXPECT_EQ(socket_mappings(), 0);
  }
  UmemConfig small_umem() const {
    UmemConfig c;
    c.frame_count = 1024;
    c.frame_bytes = 4096;
    c.fill_entries = 256;  // smaller than a slab (512), so the free stack always holds some
    c.completion_entries = 256;
    return c;
  }
  XskOptions on_queue(std::uint32_t queue) const {
    XskOptions o;
    o.ifname = veth_->inner();
    o.queue = queue;
    o.rx_entries = 512;
    o.tx_entries = 512;
    return o;
  }

  std::unique_ptr<test::VethPair> veth_;
  static inline int counter_ = 0;
};

TEST_F(XskSmoke, ReflectsUdpOnTwoQueuesSharingOneUmemAndConservesEveryFrame) {
  constexpr int kSockets = 24;
  constexpr int kPerSocket = 100;
  constexpr int kWindow = 32;
  {
    RedirectProgram program(veth_->inner_ifindex());
    SharedUmem umem(small_umem());
    XskSocket& q0 = umem.bind(on_queue(0));
    XskSocket& q1 = umem.bind(on_queue(1));
    EXPECT_FALSE(q0.bind_info().shared_umem);
    EXPECT_TRUE(q0.bind_info().flags & XDP_USE_NEED_WAKEUP);
    EXPECT_FALSE(q0.bind_info().zerocopy) << "veth has no zero-copy AF_XDP";
    EXPECT_TRUE(q1.bind_info().shared_umem);
    EXPECT_EQ(q1.bind_info().flags, XDP_SHARED_UMEM);
    EXPECT_TRUE(q1.bind_info().need_wakeup);
    EXPECT_NE(q0.fd(), q1.fd());

    UmemSlab slabs[] = {umem.pool().make_slab(0, 2), umem.pool().make_slab(1, 2)};
    int stop_fd = eventfd(0, EFD_NONBLOCK);
    std::atomic<bool> stop{false};
    Reflector workers[] = {{q0, slabs[0], stop_fd}, {q1, slabs[1], stop_fd}};
    program.insert(q0);
    program.insert(q1);
    std::thread threads[] = {std::thread([&] { workers[0].run(stop); }),
                             std::thread([&] { workers[1].run(stop); })};

    // The peer: UDP sockets on the outer end, each its own flow (and so its own tx queue).
    std::vector<int> socks;
    for (int i = 0; i < kSockets; ++i) {
      int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
      sockaddr_in local{AF_INET, 0, {}, {}};
      inet_pton(AF_INET, kOuterIp.c_str(), &local.sin_addr);
      ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&local), sizeof(local)), 0);
      sockaddr_in remote{AF_INET, htons(static_cast<std::uint16_t>(9000 + i)), {}, {}};
      inet_pton(AF_INET, kInnerIp.c_str(), &remote.sin_addr);
      ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)), 0);
      socks.push_back(s);
    }
    std::vector<std::set<int>> received(kSockets);
    int sent = 0, got = 0, mismatched = 0;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (got < kSockets * kPerSocket && std::chrono::steady_clock::now() < deadline) {
      while (sent - got < kWindow && sent < kSockets * kPerSocket) {
        int sock = sent % kSockets, seq = sent / kSockets;
        std::string p = payload_for(sock, seq);
        ASSERT_EQ(send(socks[sock], p.data(), p.size(), 0), static_cast<ssize_t>(p.size()));
        ++sent;
      }
      std::vector<pollfd> fds;
      for (int s : socks) fds.push_back({s, POLLIN, 0});
      poll(fds.data(), fds.size(), 200);
      for (int i = 0; i < kSockets; ++i) {
        char buf[2048];
        ssize_t n;
        while ((n = recv(socks[i], buf, sizeof(buf), 0)) > 0) {
          std::string reply(buf, static_cast<std::size_t>(n));
          int sock = -1, seq = -1;
          std::sscanf(reply.c_str(), "ferry-xsk %d %d", &sock, &seq);
          if (sock != i || seq < 0 || reply != payload_for(sock, seq) ||
              !received[i].insert(seq).second) {
            ++mismatched;
          }
          ++got;
        }
      }
    }
    for (int s : socks) close(s);
    stop.store(true, std::memory_order_release);
    std::uint64_t one = 1;
    ASSERT_EQ(write(stop_fd, &one, sizeof(one)), 8);
    for (auto& t : threads) t.join();
    close(stop_fd);

    EXPECT_EQ(sent, kSockets * kPerSocket);
    EXPECT_EQ(got, sent) << "datagrams reflected back";
    EXPECT_EQ(mismatched, 0) << "replies must be byte-exact, each seen once";
    EXPECT_GT(workers[0].rx_packets, 0u) << "queue 0 received nothing";
    EXPECT_GT(workers[1].rx_packets, 0u) << "queue 1 received nothing";
    EXPECT_EQ(workers[0].rx_packets + workers[1].rx_packets, static_cast<std::uint64_t>(sent));
    for (int q = 0; q < 2; ++q) {
      const Reflector& w = workers[q];
      EXPECT_EQ(w.dropped, 0u) << "queue " << q;
      EXPECT_EQ(w.rejected, 0u) << "queue " << q;
      EXPECT_EQ(w.recycled_to_fill + w.recycled_to_slab, w.tx_packets) << "queue " << q;
      EXPECT_GT(w.recycled_to_fill, 0u) << "queue " << q << ": no completion went ring to ring";
      XskSocket& s = q == 0 ? q0 : q1;
      xdp_statistics stats = s.statistics();
      std::printf("queue %d: rx_dropped %llu rx_ring_full %llu fill_empty %llu\n", q,
                  static_cast<unsigned long long>(stats.rx_dropped),
                  static_cast<unsigned long long>(stats.rx_ring_full),
                  static_cast<unsigned long long>(stats.rx_fill_ring_empty_descs));
      EXPECT_EQ(stats.rx_invalid_descs, 0u);
      EXPECT_EQ(stats.tx_invalid_descs, 0u);
      EXPECT_EQ(stats.rx_dropped, 0u);
      // Conservation, exactly: nothing left in rx, tx or completion, nothing in hand, the rest
      // between the free stack and the fill side.
      QueueRings rings = s.rings();
      FrameAccount a = account_frames(slabs[q], {&rings, 1}, 0);
      EXPECT_TRUE(a.balanced()) << "queue " << q << ": free " << a.free_stack << " fill " << a.fill
                                << " rx " << a.rx << " tx " << a.tx << " completion "
                                << a.completion;
      EXPECT_EQ(a.slab_frames, 512u);
      EXPECT_EQ(a.rx, 0u);
      EXPECT_EQ(a.tx, 0u);
      EXPECT_EQ(a.completion, 0u);
      EXPECT_EQ(a.free_stack + a.fill, 512u);
      EXPECT_EQ(a.fill, 256u) << "the fill ring is kept full";
      std::printf(
          "queue %d: rx %lu tx %lu recycled to fill %lu to slab %lu, kicks %lu sleeps %lu; "
          "free %lu fill %lu\n",
          q, w.rx_packets, w.tx_packets, w.recycled_to_fill, w.recycled_to_slab, w.tx_kicks,
          w.sleeps, a.free_stack, a.fill);
    }
  }
  // Sockets, UMEM and program are gone: nothing left on the link or in the namespace.
  EXPECT_EQ(test::run("ip -d link show dev " + veth_->inner()).find("prog/xdp"), std::string::npos);
  std::string ss = test::run("ss --xdp -a -n");
  EXPECT_EQ(std::count(ss.begin(), ss.end(), '\n'), 1) << ss;
}

TEST_F(XskSmoke, BindErrorsNameTheQueueAndTheUmemStaysUsable) {
  SharedUmem umem(small_umem());
  XskOptions missing = on_queue(0);
  missing.ifname = "fxnosuch0";
  try {
    umem.bind(missing);
    FAIL() << "bound to a missing interface";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("fxnosuch0 queue 0"), std::string::npos) << e.what();
  }
  try {
    umem.bind(on_queue(7));
    FAIL() << "bound to queue 7 of a 2-queue veth";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("queue 7"), std::string::npos) << e.what();
  }
  // The failed first bind did not spoil the UMEM: the next one works and owns its rings.
  XskSocket& q0 = umem.bind(on_queue(0));
  EXPECT_FALSE(q0.bind_info().shared_umem);
  XskSocket& q1 = umem.bind(on_queue(1));
  EXPECT_TRUE(q1.bind_info().shared_umem);
  EXPECT_EQ(umem.sockets().size(), 2u);
}

TEST_F(XskSmoke, ZeroCopyOnIsRefusedOnVethAndAutomaticFallsBackToCopy) {
  SharedUmem umem(small_umem());
  XskOptions zc = on_queue(0);
  zc.zerocopy = ZeroCopy::on;
  try {
    umem.bind(zc);
    FAIL() << "veth accepted zero-copy";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("zero-copy"), std::string::npos) << e.what();
  }
  XskSocket& copy = umem.bind(on_queue(0));
  EXPECT_FALSE(copy.bind_info().zerocopy);
  EXPECT_EQ(copy.bind_info().flags, XDP_USE_NEED_WAKEUP);
}

TEST_F(XskSmoke, UmemWithoutSocketsLeavesNoMappingBehind) {
  { SharedUmem umem(small_umem()); }
  EXPECT_EQ(socket_mappings(), 0);
  EXPECT_EQ(open_xdp_sockets(), 0);
}

}  // namespace
}  // namespace ferry::xsk

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ferry::xsk::test::enter_private_netns();
  return RUN_ALL_TESTS();
}
