// Micro-benchmarks of lib/xsk's hot path on user-space rings (no kernel): ring batch round trips,
// ring-to-ring recycling, slab alloc/free; each beside a plain memcpy of the same bytes, so the
// ratio to memory speed shows. items_per_second counts entries (descriptors or frame addresses).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/recycle.hh"
#include "lib/xsk/umem_slab.hh"
#include "lib/xsk/user_ring.hh"

namespace ferry::xsk {
namespace {

constexpr std::uint32_t kRingEntries = 2048;
constexpr std::uint32_t kFrameBytes = 2048;

template <typename Entry>
Entry entry_for(std::uint64_t i) {
  if constexpr (std::is_same_v<Entry, xdp_desc>) {
    return xdp_desc{i * kFrameBytes + 256, 64, 0};
  } else {
    return i * kFrameBytes;
  }
}

// One iteration: push `batch` entries (reserve, two-slice copy, submit), then pop them (peek,
// two-slice copy, release). Each entry crosses the ring once.
template <typename Entry>
void BM_RingRoundTrip(benchmark::State& state) {
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  UserRing<Entry> ring(kRingEntries);
  ProducerRing<Entry> producer(ring.producer());
  ConsumerRing<Entry> consumer(ring.consumer());
  std::vector<Entry> in(batch), out(batch);
  for (std::uint32_t i = 0; i < batch; ++i) in[i] = entry_for<Entry>(i);
  // Start off the array boundary so batches keep crossing the wrap at shifting offsets.
  Entry one = in[0];
  producer.push({&one, 1});
  consumer.pop({&one, 1});
  for (auto _ : state) {
    std::uint32_t pushed = producer.push(in);
    std::uint32_t popped = consumer.pop(out);
    benchmark::DoNotOptimize(pushed + popped);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * batch);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * batch * sizeof(Entry));
}

// The memory baseline of a round trip: the same bytes copied in and out with memcpy.
template <typename Entry>
void BM_MemcpyRoundTrip(benchmark::State& state) {
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  std::vector<Entry> in(batch), slots(kRingEntries), out(batch);
  for (std::uint32_t i = 0; i < batch; ++i) in[i] = entry_for<Entry>(i);
  std::size_t bytes = batch * sizeof(Entry);
  benchmark::DoNotOptimize(bytes);
  for (auto _ : state) {
    std::memcpy(slots.data(), in.data(), bytes);
    benchmark::ClobberMemory();
    std::memcpy(out.data(), slots.data(), bytes);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * batch);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * batch * sizeof(Entry));
}

// One iteration: the "kernel" completes `batch` frames (index move only; the slots hold valid
// addresses), recycle_completions moves them ring to ring into the fill ring, the "kernel" takes
// them off the fill ring (index move only). The fill ring always has room: all go ring to ring.
void BM_RecycleCompletions(benchmark::State& state) {
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::byte> umem(std::size_t{kRingEntries} * kFrameBytes);
  UmemSlab slab(umem, kFrameBytes, 0, kRingEntries);
  UserRing<std::uint64_t> completion_mem(kRingEntries), fill_mem(kRingEntries);
  CompletionRing completion(completion_mem.consumer());
  FillRing fill(fill_mem.producer());
  ProducerRing<std::uint64_t> kernel_completion(completion_mem.producer());
  ConsumerRing<std::uint64_t> kernel_fill(fill_mem.consumer());
  std::vector<std::uint64_t> frames(kRingEntries);
  slab.alloc(frames);
  kernel_completion.push(frames);  // every slot now holds a valid frame address
  completion.pop(frames);
  std::uint64_t to_fill = 0;
  for (auto _ : state) {
    kernel_completion.submit(kernel_completion.reserve(batch).size());
    RecycleResult r = recycle_completions(completion, fill, slab, batch);
    to_fill += r.to_fill;
    kernel_fill.release(kernel_fill.peek(batch).size());
    benchmark::ClobberMemory();
  }
  if (to_fill != static_cast<std::uint64_t>(state.iterations()) * batch)
    state.SkipWithError("not every frame went ring to ring");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * batch);
}

// The memory baseline of recycling: one memcpy of the same addresses.
void BM_MemcpyRecycle(benchmark::State& state) {
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::uint64_t> completion(kRingEntries, 4096), fill(kRingEntries);
  std::size_t bytes = batch * sizeof(std::uint64_t);
  benchmark::DoNotOptimize(bytes);
  for (auto _ : state) {
    std::memcpy(fill.data(), completion.data(), bytes);
    benchmark::DoNotOptimize(fill.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * batch);
}

// One iteration: alloc `batch` frames off the free stack, free them back.
template <OwnershipCheck kCheck>
void BM_SlabAllocFree(benchmark::State& state) {
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::byte> umem(std::size_t{4096} * kFrameBytes);
  UmemSlab slab(umem, kFrameBytes, 0, 4096, kCheck);
  std::vector<std::uint64_t> frames(batch);
  for (auto _ : state) {
    std::uint32_t got = slab.alloc(frames);
    SlabFreeResult r = slab.free(frames);
    benchmark::DoNotOptimize(got + r.freed);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * batch);
}

// The memory baseline of alloc + free: the same addresses copied out and back.
void BM_MemcpySlab(benchmark::State& state) {
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::uint64_t> stack(4096, 4096), frames(batch);
  std::size_t bytes = batch * sizeof(std::uint64_t);
  benchmark::DoNotOptimize(bytes);
  for (auto _ : state) {
    std::memcpy(frames.data(), stack.data() + 4096 - batch, bytes);
    benchmark::ClobberMemory();
    std::memcpy(stack.data() + 4096 - batch, frames.data(), bytes);
    benchmark::DoNotOptimize(stack.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * batch);
}

void batches(benchmark::internal::Benchmark* b) {
  for (int batch : {1, 8, 32, 64}) b->Arg(batch);
}

BENCHMARK_TEMPLATE(BM_RingRoundTrip, std::uint64_t)->Apply(batches);
BENCHMARK_TEMPLATE(BM_MemcpyRoundTrip, std::uint64_t)->Apply(batches);
BENCHMARK_TEMPLATE(BM_RingRoundTrip, xdp_desc)->Apply(batches);
BENCHMARK_TEMPLATE(BM_MemcpyRoundTrip, xdp_desc)->Apply(batches);
BENCHMARK(BM_RecycleCompletions)->Apply(batches);
BENCHMARK(BM_MemcpyRecycle)->Apply(batches);
BENCHMARK_TEMPLATE(BM_SlabAllocFree, OwnershipCheck::on)->Apply(batches);
BENCHMARK_TEMPLATE(BM_SlabAllocFree, OwnershipCheck::off)->Apply(batches);
BENCHMARK(BM_MemcpySlab)->Apply(batches);

}  // namespace
}  // namespace ferry::xsk

BENCHMARK_MAIN();
