// The per-frame cost of what the fast path added for real clients: process_frame() on a balanced
// request and a routed datagram, 64 and 1500 bytes on the wire, with a full checksum (classified,
// then updated incrementally: what frames from a NIC cost) and with a partial one (finished after
// the rewrite: what senders on the same host cost); and a hold and release of 64 frames for one
// next hop. Run tests/bench/packet/run.sh for the table.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "lib/fastpath/frame_processor.hh"
#include "lib/fastpath/hold_queue.hh"
#include "lib/packet/checksum.hh"
#include "tests/unit/fastpath/lab_tables.hh"

namespace ferry::fastpath {
namespace {

using namespace test;

enum Kind { kBalance = 0, kRoute = 1 };
enum Sum { kFull = 0, kPartial = 1 };

std::vector<std::uint8_t> frame_of(Kind kind, std::size_t wire_bytes, Sum sum) {
  packet::test::FrameSpec spec = kind == kBalance ? request() : routed();
  spec.payload.assign(wire_bytes - 42, 0x41);  // Ethernet 14 + IPv4 20 + UDP 8
  spec.partial_checksum = sum == kPartial;
  return packet::test::build_frame(spec).bytes;
}

void BM_ProcessFrame(benchmark::State& state) {
  auto kind = static_cast<Kind>(state.range(0));
  auto sum = static_cast<Sum>(state.range(2));
  const std::vector<std::uint8_t> original =
      frame_of(kind, static_cast<std::size_t>(state.range(1)), sum);
  std::vector<std::uint8_t> frame = original;
  auto snap = snapshot(config_tables(lab_config()), next_hop_tables());
  ResolutionQueue queue;
  WorkerCounters counters;
  for (auto _ : state) {
    // Only the rewritten bytes go back (headers), so both kinds copy the same 48 bytes.
    std::memcpy(frame.data(), original.data(), 48);
    FrameOutcome o = process_frame({frame.data(), frame.size()}, *snap, 0, {queue, counters});
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(kind == kBalance ? "balance" : "route") + " " +
                 std::to_string(state.range(1)) + " B " + (sum == kFull ? "full" : "partial"));
  if (sum == kPartial && counters.checksums_partial.value() == 0) state.SkipWithError("not finished");
}
BENCHMARK(BM_ProcessFrame)->ArgsProduct({{kBalance, kRoute}, {64, 1500}, {kFull, kPartial}});

// What every frame pays now, full checksum or not: the pseudo-header sum and one comparison.
void BM_ClassifyChecksum(benchmark::State& state) {
  const std::vector<std::uint8_t> f = frame_of(kBalance, 64, kFull);
  packet::ParsedPacket p;
  packet::parse_frame({f.data(), f.size()}, p);
  for (auto _ : state) {
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(packet::classify_l4_checksum({f.data(), f.size()}, p));
  }
}
BENCHMARK(BM_ClassifyChecksum);

void BM_HoldAndRelease64(benchmark::State& state) {
  NeighbourKey hop{1, packet::IpVersion::v4, addr("10.2.0.9")};
  NeighbourTable resolved(std::vector<Neighbour>{{hop, kBackendMac}});
  HoldQueue q;
  std::uint64_t sent = 0;
  for (auto _ : state) {
    for (std::uint64_t i = 0; i < 64; ++i) q.hold(hop, 1, i * 4096, 100);
    q.release(resolved, [&](const HoldQueue::Frame& f, const packet::MacAddress&) { sent += f.len; });
  }
  benchmark::DoNotOptimize(sent);
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_HoldAndRelease64);

}  // namespace
}  // namespace ferry::fastpath

BENCHMARK_MAIN();
