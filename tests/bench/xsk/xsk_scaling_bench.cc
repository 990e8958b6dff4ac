// Multi-slab scaling of lib/xsk's frame path: 1..8 worker threads, each on its own slab of ONE
// shared UmemPool, move UDP frames rx -> parse + reflect -> tx -> completion -> fill, user-space
// rings playing the kernel's side; reports aggregate packets/s, drops and per-flow FIFO order.
#include <benchmark/benchmark.h>

#include <array>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "lib/packet/parse.hh"
#include "lib/packet/reflect.hh"
#include "lib/xsk/frame_account.hh"
#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/recycle.hh"
#include "lib/xsk/umem_pool.hh"
#include "lib/xsk/user_ring.hh"

namespace ferry::xsk {
namespace {

constexpr std::uint32_t kSlabs = 8;  // the pool is cut for the largest run; thread t uses slab t
constexpr std::uint32_t kFramesPerSlab = 4096;
constexpr std::uint32_t kFrameBytes = 2048;
constexpr std::uint32_t kRingEntries = 2048;
constexpr std::uint32_t kFillTarget = 1024;  // frames kept on the fill ring, as the worker does
constexpr std::uint32_t kBurst = 32;         // frames the "NIC" delivers per iteration
constexpr std::uint32_t kFlows = 64;         // flows per thread, interleaved round robin
constexpr std::uint32_t kPacketBytes = 64;   // a minimum-size UDP frame
constexpr std::uint32_t kFlowOffset = 42;    // UDP payload: flow id (u32), sequence number (u64)
constexpr std::uint32_t kSeqOffset = 46;

// Ethernet + IPv4 (checksum valid) + UDP header of a 64-byte frame, 10.0.0.1:1000 -> 10.0.0.2:53.
// clang-format off
constexpr std::array<std::uint8_t, kFlowOffset> kHeaders = {
    0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,  // eth
    0x45, 0, 0, 50, 0, 0, 0x40, 0, 64, 17, 0x26, 0xb9,           // ipv4 (total 50, DF, TTL 64)
    10, 0, 0, 1, 10, 0, 0, 2,                                    //   saddr, daddr
    0x03, 0xe8, 0, 53, 0, 30, 0, 0,                              // udp, checksum 0 (none)
};
// clang-format on

// The one UMEM: registered once, like ferryd's; slabs are disjoint frame ranges of it.
UmemPool& shared_pool() {
  static UmemPool pool(UmemConfig{.frame_count = kSlabs * kFramesPerSlab,
                                  .frame_bytes = kFrameBytes,
                                  .headroom_bytes = 0,
                                  .fill_entries = kRingEntries,
                                  .completion_entries = kRingEntries,
                                  .hugepages = HugePages::automatic});
  return pool;
}

// Counters of one thread's run, checked after the timed loop.
struct LaneResult {
  std::uint64_t offered = 0;       // frames arriving at the "NIC" (kBurst per iteration)
  std::uint64_t transmitted = 0;   // frames the "NIC" took off the tx ring
  std::uint64_t drops = 0;         // fill ring empty, rx or tx ring full, bad descriptor, parse
  std::uint64_t order_errors = 0;  // a flow's frame arrived at the end with an unexpected number
  std::uint64_t rejected = 0;      // frames the slab refused back
};

// One worker's queue: its slab, its four rings, and the "kernel" ends of them.
class Lane {
 public:
  explicit Lane(std::uint32_t slab_index)
      : slab_(shared_pool().make_slab(slab_index, kSlabs)),
        fill_mem_(kRingEntries),
        completion_mem_(kRingEntries),
        rx_mem_(kRingEntries),
        tx_mem_(kRingEntries) {
    rings_.fill = FillRing(fill_mem_.producer());
    rings_.completion = CompletionRing(completion_mem_.consumer());
    rings_.rx = RxRing(rx_mem_.consumer());
    rings_.tx = TxRing(tx_mem_.producer());
    kernel_fill_ = ConsumerRing<std::uint64_t>(fill_mem_.consumer());
    kernel_completion_ = ProducerRing<std::uint64_t>(completion_mem_.producer());
    kernel_rx_ = ProducerRing<xdp_desc>(rx_mem_.producer());
    kernel_tx_ = ConsumerRing<xdp_desc>(tx_mem_.consumer());
    refill(rings_.fill, slab_, kFillTarget);
  }

  // One iteration: a burst arrives, the worker handles it, the "NIC" sends and completes it.
  void turn() {
    receive_burst();
    worker_turn();
    transmit_and_complete();
  }

  // Frame conservation (free + fill + rx + tx + completion == slab) and per-flow completeness:
  // every offered frame was transmitted or counted as a drop, and with no drops each flow's
  // last transmitted number is its last numbered one.
  std::string verify() const {
    FrameAccount account = account_frames(slab_, {&rings_, 1}, 0);
    if (!account.balanced()) {
      return "slab " + std::to_string(account.accounted()) + " frames accounted of " +
             std::to_string(account.slab_frames);
    }
    if (result_.offered != result_.transmitted + result_.drops) return "frames unaccounted";
    if (result_.drops == 0 && next_expected_ != next_sent_) return "a flow lost its tail";
    return {};
  }

  const LaneResult& result() const { return result_; }

 private:
  // The kernel's receive: fill-ring frames get a packet each and go onto the rx ring. Frames
  // without a fill entry or rx slot are the kernel's drops; their sequence numbers are not used.
  void receive_burst() {
    RingSlices<const std::uint64_t> frames = kernel_fill_.peek(kBurst);
    RingSlices<xdp_desc> slots = kernel_rx_.reserve(frames.size());
    for (std::uint32_t i = 0; i < slots.size(); ++i) {
      std::uint64_t addr = frames[i];
      std::uint8_t* p = reinterpret_cast<std::uint8_t*>(slab_.packet(addr, kPacketBytes));
      std::uint32_t flow = flow_cursor_++ % kFlows;
      std::uint64_t seq = next_sent_[flow]++;
      std::memcpy(p, kHeaders.data(), kHeaders.size());
      std::memcpy(p + kFlowOffset, &flow, sizeof flow);
      std::memcpy(p + kSeqOffset, &seq, sizeof seq);
      slots[i] = xdp_desc{addr, kPacketBytes, 0};
    }
    kernel_rx_.submit(slots.size());
    kernel_fill_.cancel(frames.size() - slots.size());
    kernel_fill_.release(slots.size());
    result_.offered += kBurst;
    result_.drops += kBurst - slots.size();
  }

  // The worker loop of lib/fastpath, minus the sockets: recycle, rx burst, process, tx burst.
  void worker_turn() {
    RecycleResult recycled = recycle_completions(rings_.completion, rings_.fill, slab_, 2 * kBurst);
    result_.rejected += recycled.rejected;
    std::uint32_t on_fill = rings_.fill.producer_word() - kernel_fill_consumed();
    if (on_fill < kFillTarget) refill(rings_.fill, slab_, kFillTarget - on_fill);

    RingSlices<const xdp_desc> rx = rings_.rx.peek(kBurst);
    RingSlices<xdp_desc> tx = rings_.tx.reserve(rx.size());
    std::uint32_t sent = 0;
    for (std::uint32_t i = 0; i < rx.size(); ++i) {
      const xdp_desc& d = rx[i];
      std::byte* frame = slab_.packet(d.addr, d.len);
      packet::ParsedPacket parsed;
      bool ok = frame && sent < tx.size() &&
                packet::parse_frame(packet::frame_bytes(frame, d.len), parsed) ==
                    packet::ParseError::none;
      if (ok) {
        packet::reflect(packet::frame_bytes(frame, d.len), parsed, 0);
        tx[sent++] = d;
      } else {
        std::uint64_t addr = d.addr;
        result_.rejected += slab_.free({&addr, 1}).outside_slab;
        ++result_.drops;
      }
    }
    rings_.tx.cancel(tx.size() - sent);
    rings_.tx.submit(sent);
    rings_.rx.release(rx.size());
  }

  // The end of the path: the "NIC" sends the tx ring's frames (checking each flow's order) and
  // completes them.
  void transmit_and_complete() {
    RingSlices<const xdp_desc> tx = kernel_tx_.peek(kRingEntries);
    RingSlices<std::uint64_t> done = kernel_completion_.reserve(tx.size());
    for (std::uint32_t i = 0; i < done.size(); ++i) {
      const std::uint8_t* p =
          reinterpret_cast<const std::uint8_t*>(slab_.packet(tx[i].addr, tx[i].len));
      std::uint32_t flow;
      std::uint64_t seq;
      std::memcpy(&flow, p + kFlowOffset, sizeof flow);
      std::memcpy(&seq, p + kSeqOffset, sizeof seq);
      // Strict FIFO: the next number of the flow, or (after a drop) a later one; never earlier.
      if (flow >= kFlows || seq < next_expected_[flow] ||
          (result_.drops == 0 && seq != next_expected_[flow])) {
        ++result_.order_errors;
      } else {
        next_expected_[flow] = seq + 1;
      }
      done[i] = tx[i].addr;
    }
    kernel_completion_.submit(done.size());
    kernel_tx_.cancel(tx.size() - done.size());
    kernel_tx_.release(done.size());
    result_.transmitted += done.size();
  }

  // The "kernel" has taken this many fill entries so far (its consumer index).
  std::uint32_t kernel_fill_consumed() const { return kernel_fill_.consumer_word(); }

  UmemSlab slab_;
  UserRing<std::uint64_t> fill_mem_;
  UserRing<std::uint64_t> completion_mem_;
  UserRing<xdp_desc> rx_mem_;
  UserRing<xdp_desc> tx_mem_;
  QueueRings rings_;
  ConsumerRing<std::uint64_t> kernel_fill_;
  ProducerRing<std::uint64_t> kernel_completion_;
  ProducerRing<xdp_desc> kernel_rx_;
  ConsumerRing<xdp_desc> kernel_tx_;
  std::array<std::uint64_t, kFlows> next_sent_{};
  std::array<std::uint64_t, kFlows> next_expected_{};
  std::uint32_t flow_cursor_ = 0;
  LaneResult result_;
};

// Each benchmark thread is one worker with one lane; items = frames through the whole path.
// Real time, so items_per_second is the aggregate rate of all threads together.
void BM_MultiSlabForward(benchmark::State& state) {
  std::unique_ptr<Lane> lane;
  try {
    lane = std::make_unique<Lane>(static_cast<std::uint32_t>(state.thread_index()));
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("cannot set up the UMEM (run as root): ") + e.what()).c_str());
    return;
  }
  for (auto _ : state) {
    lane->turn();
  }
  const LaneResult& r = lane->result();
  std::string problem = lane->verify();
  if (problem.empty() && r.order_errors) problem = "per-flow order broken";
  if (problem.empty() && r.rejected) problem = "the slab refused frames";
  if (!problem.empty()) state.SkipWithError(problem.c_str());
  state.SetItemsProcessed(static_cast<std::int64_t>(r.transmitted));
  state.SetBytesProcessed(static_cast<std::int64_t>(r.transmitted) * kPacketBytes);
  state.counters["frames"] = benchmark::Counter(static_cast<double>(r.transmitted));
  state.counters["drops"] = benchmark::Counter(static_cast<double>(r.drops));
  state.counters["order_errors"] = benchmark::Counter(static_cast<double>(r.order_errors));
}

BENCHMARK(BM_MultiSlabForward)->Threads(1)->Threads(2)->Threads(4)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace ferry::xsk

BENCHMARK_MAIN();
