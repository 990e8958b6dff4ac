// Evaluation of the kernel finishing checksums for AF_XDP transmits (TX metadata,
// XDP_TXMD_FLAGS_CHECKSUM, kernel >= 6.8) next to ferry's software finish, on one veth in copy
// mode: transmits COUNT frames of SIZE bytes whose UDP checksum holds the pseudo-header sum (what
// a partial frame looks like after ferry's rewrite), either finished in user space first
// (packet::finish_l4_checksum, "sw") or handed to the kernel with a checksum request ("txmd").
// Prints the process's CPU time per frame. Raw AF_XDP syscalls, not libxdp: libxdp 1.3.1 cannot
// register a UMEM with tx_metadata_len, which is why ferry itself does not use this path (yet).
//   txmd_eval IFNAME sw|txmd COUNT SIZE SRC_MAC DST_MAC SRC_IP DST_IP
#include <arpa/inet.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lib/packet/checksum.hh"
#include "lib/packet/parse.hh"
#include "tests/unit/packet/frame_builder.hh"

namespace {

// UAPI of kernels >= 6.8 / 6.11 that bookworm's linux/if_xdp.h lacks.
constexpr std::uint32_t kTxMetadataOption = 1u << 1;     // xdp_desc.options: XDP_TX_METADATA
constexpr std::uint64_t kTxmdChecksum = 1u << 1;         // XDP_TXMD_FLAGS_CHECKSUM
constexpr std::uint32_t kUmemTxMetadataLen = 1u << 2;    // xdp_umem_reg.flags
struct UmemReg {
  std::uint64_t addr, len;
  std::uint32_t chunk_size, headroom, flags, tx_metadata_len;
};
struct TxMetadata {  // union xsk_tx_metadata, the request half
  std::uint64_t flags;
  std::uint16_t csum_start, csum_offset;
  std::uint32_t pad;
  std::uint64_t launch_time;
};
constexpr std::uint32_t kMetaLen = sizeof(TxMetadata);  // 24: a multiple of 8
constexpr std::uint32_t kFrame = 4096, kFrames = 4096, kRing = 2048, kBatch = 64;

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

std::array<std::uint8_t, 6> mac(const char* s) {
  std::array<std::uint8_t, 6> m{};
  unsigned v[6];
  if (std::sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) die(s);
  for (int i = 0; i < 6; ++i) m[i] = static_cast<std::uint8_t>(v[i]);
  return m;
}

template <typename T>
struct Ring {
  std::atomic<std::uint32_t>* producer;
  std::atomic<std::uint32_t>* consumer;
  T* entries;
};

template <typename T>
Ring<T> map_ring(int fd, const xdp_ring_offset& off, std::uint64_t pgoff) {
  std::size_t bytes = off.desc + kRing * sizeof(T);
  auto* base = static_cast<std::uint8_t*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff));
  if (base == MAP_FAILED) die("mmap ring");
  return {reinterpret_cast<std::atomic<std::uint32_t>*>(base + off.producer),
          reinterpret_cast<std::atomic<std::uint32_t>*>(base + off.consumer),
          reinterpret_cast<T*>(base + off.desc)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: txmd_eval IFNAME sw|txmd COUNT SIZE SRC_MAC DST_MAC SRC_IP DST_IP\n");
    return 2;
  }
  bool txmd = std::string(argv[2]) == "txmd";
  std::uint64_t count = std::strtoull(argv[3], nullptr, 10);
  std::size_t size = std::strtoul(argv[4], nullptr, 10);

  ferry::packet::test::FrameSpec spec;
  spec.src_mac = mac(argv[5]);
  spec.dst_mac = mac(argv[6]);
  spec.src = ferry::packet::test::addr(argv[7]);
  spec.dst = ferry::packet::test::addr(argv[8]);
  spec.dst_port = 9;
  spec.payload.assign(size - 42, 0x41);
  spec.partial_checksum = true;  // what a partial frame looks like after ferry's rewrite
  std::vector<std::uint8_t> frame = ferry::packet::test::build_frame(spec).bytes;
  ferry::packet::ParsedPacket p;
  if (ferry::packet::parse_frame({frame.data(), frame.size()}, p) != ferry::packet::ParseError::none) {
    die("template frame");
  }

  int fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket(AF_XDP)");
  void* area = mmap(nullptr, std::size_t{kFrame} * kFrames, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (area == MAP_FAILED) die("mmap umem");
  UmemReg reg{reinterpret_cast<std::uintptr_t>(area), std::uint64_t{kFrame} * kFrames, kFrame, 0,
              txmd ? kUmemTxMetadataLen : 0, txmd ? kMetaLen : 0};
  if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) != 0) die("XDP_UMEM_REG");
  std::uint32_t entries = kRing;
  for (int opt : {XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_TX_RING}) {
    if (setsockopt(fd, SOL_XDP, opt, &entries, sizeof(entries)) != 0) die("ring size");
  }
  xdp_mmap_offsets off{};
  socklen_t optlen = sizeof(off);
  if (getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen) != 0) die("XDP_MMAP_OFFSETS");
  Ring<xdp_desc> tx = map_ring<xdp_desc>(fd, off.tx, XDP_PGOFF_TX_RING);
  Ring<std::uint64_t> comp = map_ring<std::uint64_t>(fd, off.cr, XDP_UMEM_PGOFF_COMPLETION_RING);
  sockaddr_xdp sxdp{};
  sxdp.sxdp_family = AF_XDP;
  sxdp.sxdp_ifindex = if_nametoindex(argv[1]);
  sxdp.sxdp_queue_id = 0;
  sxdp.sxdp_flags = XDP_COPY;
  // The previous run's socket on this queue is released after its process exits (deferred):
  // until then the bind is EBUSY.
  for (int attempt = 0; bind(fd, reinterpret_cast<sockaddr*>(&sxdp), sizeof(sxdp)) != 0; ++attempt) {
    if (errno != EBUSY || attempt == 500) die("bind");
    usleep(10000);
  }

  // Every chunk holds the frame at offset kMetaLen, the metadata before it; the loop restores the
  // 48 header bytes a rewrite changes (checksum field included) and finishes or requests, per
  // frame, as a worker would.
  auto* umem = static_cast<std::uint8_t*>(area);
  std::vector<std::uint64_t> free_frames;
  for (std::uint32_t i = 0; i < kFrames; ++i) {
    free_frames.push_back(std::uint64_t{i} * kFrame);
    std::memcpy(umem + std::uint64_t{i} * kFrame + kMetaLen, frame.data(), frame.size());
  }
  std::uint64_t sent = 0, completed = 0;
  std::uint32_t tx_prod = 0, comp_cons = 0;
  rusage r0{}, r1{};
  getrusage(RUSAGE_SELF, &r0);
  while (completed < count) {
    std::uint32_t n = 0;
    while (n < kBatch && sent < count && !free_frames.empty() &&
           tx_prod - tx.consumer->load(std::memory_order_acquire) < kRing) {
      std::uint64_t chunk = free_frames.back();
      free_frames.pop_back();
      std::uint8_t* data = umem + chunk + kMetaLen;
      std::memcpy(data, frame.data(), 48);
      xdp_desc& d = tx.entries[tx_prod & (kRing - 1)];
      d.addr = chunk + kMetaLen;
      d.len = static_cast<std::uint32_t>(frame.size());
      if (txmd) {
        auto* meta = reinterpret_cast<TxMetadata*>(data - kMetaLen);
        *meta = {};
        meta->flags = kTxmdChecksum;
        meta->csum_start = static_cast<std::uint16_t>(p.l4_offset);
        meta->csum_offset = 6;
        d.options = kTxMetadataOption;
      } else {
        ferry::packet::finish_l4_checksum({data, frame.size()}, p);
        d.options = 0;
      }
      ++tx_prod;
      ++sent;
      ++n;
    }
    tx.producer->store(tx_prod, std::memory_order_release);
    if (sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0 && errno != EAGAIN &&
        errno != EBUSY && errno != ENOBUFS) {
      die("sendto");
    }
    std::uint32_t done = comp.producer->load(std::memory_order_acquire) - comp_cons;
    for (std::uint32_t i = 0; i < done; ++i) {
      free_frames.push_back((comp.entries[(comp_cons + i) & (kRing - 1)] / kFrame) * kFrame);
    }
    comp_cons += done;
    comp.consumer->store(comp_cons, std::memory_order_release);
    completed += done;
  }
  getrusage(RUSAGE_SELF, &r1);
  auto us = [](const timeval& t) { return t.tv_sec * 1e6 + t.tv_usec; };
  double user = us(r1.ru_utime) - us(r0.ru_utime), sys = us(r1.ru_stime) - us(r0.ru_stime);
  std::printf("%s %zu B: %llu frames, user %.0f ns/frame, sys %.0f ns/frame, total %.0f ns/frame\n",
              txmd ? "txmd" : "sw", frame.size(), static_cast<unsigned long long>(completed),
              user * 1000 / completed, sys * 1000 / completed, (user + sys) * 1000 / completed);
  return 0;
}
