// The per-frame cost of what the fast path added for real clients: process_frame() on a balanced
// request and a routed datagram, 64 and 1500 bytes on the wire, with a full checksum (classified,
// then updated incrementally: what frames from a NIC cost) and with a partial one (finished after
// the rewrite: what senders on the same host cost); a balanced request with the flow affinity
// table off, on and full; a request to a direct-server-return service, encapsulated; and a hold
// and release of 64 frames for one next hop. Run
// tests/bench/packet/run.sh for the table. Balanced frames are counted per backend, as in the
// worker.
#include <benchmark/benchmark.h>

#include <cstring>
#include <optional>
#include <vector>

#include "lib/fastpath/flow_table.hh"
#include "lib/fastpath/frame_processor.hh"
#include "lib/fastpath/hold_queue.hh"
#include "lib/packet/checksum.hh"
#include "tests/unit/fastpath/ip_hop_state.hh"
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

// Requests the balanced service's three backends were counted for (slots 0..2).
std::uint64_t counted_requests(const BackendCounters& backends) {
  return backends[0].in_packets.value() + backends[1].in_packets.value() +
         backends[2].in_packets.value();
}

void BM_ProcessFrame(benchmark::State& state) {
  auto kind = static_cast<Kind>(state.range(0));
  auto sum = static_cast<Sum>(state.range(2));
  const std::vector<std::uint8_t> original =
      frame_of(kind, static_cast<std::size_t>(state.range(1)), sum);
  std::vector<std::uint8_t> frame = original;
  BackendSlots slots;
  auto snap = snapshot(config_tables(lab_config(), {}, &slots), next_hop_tables());
  ResolutionQueue queue;
  WorkerCounters counters;
  BackendCounters backends;
  for (auto _ : state) {
    // Only the rewritten bytes go back (headers), so both kinds copy the same 48 bytes.
    std::memcpy(frame.data(), original.data(), 48);
    FrameOutcome o =
        process_frame({frame.data(), frame.size()}, *snap, 0, {queue, counters, &backends});
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(kind == kBalance ? "balance" : "route") + " " +
                 std::to_string(state.range(1)) + " B " + (sum == kFull ? "full" : "partial"));
  if (sum == kPartial && counters.checksums_partial.value() == 0)
    state.SkipWithError("not finished");
  if (kind == kBalance && counted_requests(backends) == 0) state.SkipWithError("not counted");
}
BENCHMARK(BM_ProcessFrame)->ArgsProduct({{kBalance, kRoute}, {64, 1500}, {kFull, kPartial}});

// BM_ProcessFrame's balanced request with the XDP program's match passed as the worker passes it
// (ServiceTable::match(p, hint): one comparison instead of the lookup), next to it without one.
void BM_ProcessFrameHinted(benchmark::State& state) {
  auto sum = static_cast<Sum>(state.range(1));
  const std::vector<std::uint8_t> original =
      frame_of(kBalance, static_cast<std::size_t>(state.range(0)), sum);
  std::vector<std::uint8_t> frame = original;
  packet::ServiceTableOptions options;
  options.steering_id = [](const config::ServiceConfig& s) -> std::optional<std::uint32_t> {
    return s.name == "dns" ? 5 : 9;
  };
  BackendSlots slots;
  auto snap = snapshot(config_tables(lab_config(), options, &slots), next_hop_tables());
  const packet::MatchHint hint{packet::MatchKind::to_service, 5, 0};
  ResolutionQueue queue;
  WorkerCounters counters;
  BackendCounters backends;
  for (auto _ : state) {
    std::memcpy(frame.data(), original.data(), 48);
    FrameOutcome o = process_frame({frame.data(), frame.size()}, *snap, 0,
                                   {queue, counters, &backends}, {}, {}, hint);
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
  state.SetLabel("balance " + std::to_string(state.range(0)) + " B " +
                 (sum == kFull ? "full" : "partial") + ", hinted");
  if (counters.matched_without_hint.value() != 0) state.SkipWithError("hint not taken");
  if (counted_requests(backends) == 0) state.SkipWithError("not counted");
}
BENCHMARK(BM_ProcessFrameHinted)->ArgsProduct({{64, 1500}, {kFull, kPartial}});

// Direct server return: BM_ProcessFrame's balanced request (full checksum) to the service
// forwarding ipip or gue, in a chunk with the 256 bytes of headroom the kernel leaves before a
// frame, so its outer header goes in front of it; 64 and 1400 bytes on the wire (1500 would not
// fit a 1500-byte tunnel link once encapsulated).
void BM_ProcessFrameEncap(benchmark::State& state) {
  const bool gue = state.range(0) != 0;
  const std::vector<std::uint8_t> original =
      frame_of(kBalance, static_cast<std::size_t>(state.range(1)), kFull);
  constexpr std::uint32_t kHeadroom = 256;
  constexpr std::uint32_t kRoom = 2048;
  std::vector<std::uint8_t> chunk(kHeadroom + original.size() + kRoom);
  std::uint8_t* frame = chunk.data() + kHeadroom;
  std::memcpy(frame, original.data(), original.size());
  config::Config c = lab_config();
  c.services[0].forwarding = gue ? config::Forwarding::gue : config::Forwarding::ipip;
  c.xdp.encap = config::EncapConfig{ip("10.9.0.1"), std::nullopt, ip("2001:db8:9::1"), 6080};
  BackendSlots slots;
  auto snap = snapshot(config_tables(c, {}, &slots), next_hop_tables());
  snap->ports = port_facts(1500, 1500);
  ResolutionQueue queue;
  WorkerCounters counters;
  BackendCounters backends;
  IpHopState ip_hop;
  const IpHop hop = ip_hop.at(5000, kRoom, kHeadroom);
  std::uint32_t front = 0;
  for (auto _ : state) {
    std::memcpy(frame, original.data(), 48);
    FrameOutcome o =
        process_frame({frame, original.size()}, *snap, 0, {queue, counters, &backends}, {}, hop);
    front = o.front;
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(gue ? "gue " : "ipip ") + std::to_string(state.range(1)) + " B full");
  if (front != (gue ? 28u : 20u)) state.SkipWithError("not encapsulated");
}
BENCHMARK(BM_ProcessFrameEncap)->ArgsProduct({{0, 1}, {64, 1400}});

// A balanced 64 B request of one of `flows` client flows (the source address's last byte and the
// source port vary, as in a real mix), with the flow table off, on (every packet a hit once the
// flows are in), or full (the flows outnumber the table 16:1: every packet a miss that evicts);
// "on, reset" is "on" for a service whose flows were reset (announced again) before the run, so
// every hit also checks the entry against the reset.
// The clock and the sweep run once per 64 frames, as in the worker.
enum FlowMode { kTableOff = 0, kTableOn = 1, kTableFull = 2, kTableOnReset = 3 };

void BM_BalanceFlows(benchmark::State& state) {
  auto mode = static_cast<FlowMode>(state.range(0));
  auto flows = static_cast<std::uint32_t>(state.range(1));
  const std::vector<std::uint8_t> original = frame_of(kBalance, 64, kFull);
  std::vector<std::uint8_t> frame = original;
  packet::ServiceTableOptions options;
  if (mode == kTableOnReset) {
    std::uint32_t reset_ms = FlowTable::clock_ms() - 1;
    options.flows_reset_ms = [reset_ms](const config::ServiceConfig&) { return reset_ms; };
  }
  auto snap = snapshot(config_tables(lab_config(), options), next_hop_tables());
  ResolutionQueue queue;
  WorkerCounters counters;
  FlowTable table(mode == kTableOff ? 0 : 65536, 30000, counters.flows);
  std::uint32_t now_ms = 1;
  std::uint32_t flow = 0;
  std::uint64_t n = 0;
  for (auto _ : state) {
    std::memcpy(frame.data(), original.data(), 48);
    frame[28] = static_cast<std::uint8_t>(flow >> 16);  // IPv4 source address, last two bytes
    frame[29] = static_cast<std::uint8_t>(flow >> 8);
    frame[35] = static_cast<std::uint8_t>(flow);  // UDP source port, low byte
    if (++flow == flows) flow = 0;
    FlowAffinity affinity;
    if (table.enabled()) affinity = {&table, now_ms};
    FrameOutcome o =
        process_frame({frame.data(), frame.size()}, *snap, 0, {queue, counters}, affinity);
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
    if ((++n & 63) == 0 && table.enabled()) {
      now_ms = FlowTable::clock_ms();
      table.sweep(now_ms, FlowTable::kWays);
    }
  }
  const char* names[] = {"off", "on", "full", "on, reset"};
  state.SetLabel(std::string("table ") + names[mode] + ", " + std::to_string(flows) + " flows");
  // (Google Benchmark's first, short runs are too short to tell.)
  if (n > 4 * std::uint64_t{flows}) {
    if ((mode == kTableOn || mode == kTableOnReset) && counters.flows.hits.value() < n / 2) {
      state.SkipWithError("not hits");
    }
    if (mode == kTableFull && counters.flows.evictions.value() < n / 2) {
      state.SkipWithError("not evicting");
    }
  }
}
BENCHMARK(BM_BalanceFlows)
    ->Args({kTableOff, 1024})
    ->Args({kTableOn, 1024})
    ->Args({kTableOff, 32768})
    ->Args({kTableOn, 32768})
    ->Args({kTableOnReset, 32768})
    ->Args({kTableFull, 1u << 20});

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
    q.release(resolved,
              [&](const HoldQueue::Frame& f, const packet::MacAddress&) { sent += f.len; });
  }
  benchmark::DoNotOptimize(sent);
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_HoldAndRelease64);

}  // namespace
}  // namespace ferry::fastpath

BENCHMARK_MAIN();
