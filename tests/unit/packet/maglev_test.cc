// Maglev: even split of the table, minimal disruption when a backend leaves, determinism; and
// weights: shares in proportion, weight 0 out, equal weights the unweighted table bit for bit.
#include "lib/packet/maglev.hh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/packet/flow_hash.hh"

namespace ferry::packet {
namespace {

std::vector<std::string> backend_names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("10.0.1." + std::to_string(i + 2) + ":53");
  return names;
}

// All backends of `names` except `skip` (-1: none), each with its index in `names`.
MaglevTable build_without(const std::vector<std::string>& names, int skip, std::uint32_t size) {
  std::vector<MaglevBackend> in;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (static_cast<int>(i) != skip) in.push_back({names[i], static_cast<std::uint16_t>(i)});
  }
  return MaglevTable::build(in, size);
}

// Random 5-tuples hashed as the workers do.
std::vector<std::uint64_t> random_flow_hashes(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> hashes;
  hashes.reserve(count);
  ParsedPacket p;
  p.protocol = IPPROTO_UDP;
  p.dst_address = {10, 0, 0, 10};
  p.dst_port = 53;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t r = rng();
    p.src_address = {static_cast<std::uint8_t>(r), static_cast<std::uint8_t>(r >> 8),
                     static_cast<std::uint8_t>(r >> 16), static_cast<std::uint8_t>(r >> 24)};
    p.src_port = static_cast<std::uint16_t>(r >> 32);
    hashes.push_back(flow_hash(p, kDefaultFlowHashSeed));
  }
  return hashes;
}

TEST(Maglev, IsPrime) {
  EXPECT_TRUE(is_prime(65537));
  EXPECT_TRUE(is_prime(2));
  EXPECT_TRUE(is_prime(251));
  EXPECT_FALSE(is_prime(0));
  EXPECT_FALSE(is_prime(1));
  EXPECT_FALSE(is_prime(65536));
  EXPECT_FALSE(is_prime(65539 * 3));
}

TEST(Maglev, EveryBackendGetsItsShareOfSlots) {
  for (int n : {1, 2, 3, 10, 37, 100}) {
    auto names = backend_names(n);
    MaglevTable t = build_without(names, -1, MaglevTable::kDefaultSize);
    ASSERT_EQ(t.slots().size(), MaglevTable::kDefaultSize);
    std::vector<std::uint32_t> count(n, 0);
    for (std::uint16_t b : t.slots()) {
      ASSERT_LT(b, n);
      ++count[b];
    }
    double share = static_cast<double>(MaglevTable::kDefaultSize) / n;
    for (int i = 0; i < n; ++i) {
      EXPECT_GE(count[i], share * 0.9) << n << " backends, backend " << i;
      EXPECT_LE(count[i], share * 1.1) << n << " backends, backend " << i;
      // One slot per backend per round: counts differ by at most one.
      EXPECT_LE(count[i], static_cast<std::uint32_t>(share) + 1);
      EXPECT_GE(count[i], static_cast<std::uint32_t>(share));
    }
  }
}

TEST(Maglev, FlowsSpreadEvenlyOverBackends) {
  auto names = backend_names(10);
  MaglevTable t = build_without(names, -1, MaglevTable::kDefaultSize);
  std::vector<std::uint32_t> count(10, 0);
  auto flows = random_flow_hashes(1'000'000, 1);
  for (std::uint64_t h : flows) ++count[t.lookup(h)];
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(count[i], 100'000, 10'000) << "backend " << i;
  }
}

TEST(Maglev, RemovingOneOfTenMovesOnlyItsFlowsPlusLittle) {
  auto names = backend_names(10);
  MaglevTable before = build_without(names, -1, MaglevTable::kDefaultSize);
  auto flows = random_flow_hashes(1'000'000, 2);
  for (int removed = 0; removed < 10; ++removed) {
    MaglevTable after = build_without(names, removed, MaglevTable::kDefaultSize);
    std::size_t on_removed = 0, moved_elsewhere = 0;
    for (std::uint64_t h : flows) {
      std::uint16_t a = before.lookup(h), b = after.lookup(h);
      ASSERT_NE(b, removed);
      if (a == removed) {
        ++on_removed;  // had to move, and did (b != removed)
      } else if (a != b) {
        ++moved_elsewhere;
      }
    }
    double moved_share = static_cast<double>(moved_elsewhere) / flows.size();
    double removed_share = static_cast<double>(on_removed) / flows.size();
    EXPECT_LT(moved_share, 0.02) << "removing backend " << removed;
    EXPECT_NEAR(removed_share, 0.1, 0.01) << "removing backend " << removed;
    if (removed == 0) {
      std::printf("remove 1 of 10: %.2f%% of flows were on it, %.3f%% of the others moved\n",
                  100 * removed_share, 100 * moved_share);
    }
  }
}

TEST(Maglev, ReaddingABackendRestoresTheTable) {
  auto names = backend_names(10);
  MaglevTable full = build_without(names, -1, 1031);
  MaglevTable again = build_without(names, -1, 1031);
  ASSERT_TRUE(std::equal(full.slots().begin(), full.slots().end(), again.slots().begin()));
  MaglevTable without = build_without(names, 4, 1031);
  EXPECT_FALSE(std::equal(full.slots().begin(), full.slots().end(), without.slots().begin()));
}

TEST(Maglev, InputOrderDoesNotMatter) {
  auto names = backend_names(20);
  std::vector<MaglevBackend> in;
  for (std::size_t i = 0; i < names.size(); ++i) {
    in.push_back({names[i], static_cast<std::uint16_t>(i)});
  }
  MaglevTable a = MaglevTable::build(in, 4099);
  std::mt19937 rng(3);
  std::shuffle(in.begin(), in.end(), rng);
  MaglevTable b = MaglevTable::build(in, 4099);
  EXPECT_TRUE(std::equal(a.slots().begin(), a.slots().end(), b.slots().begin()));
}

TEST(Maglev, SmallTablesForTests) {
  auto names = backend_names(3);
  MaglevTable t = build_without(names, -1, 13);
  ASSERT_EQ(t.slots().size(), 13u);
  std::vector<int> count(3, 0);
  for (std::uint16_t b : t.slots()) ++count[b];
  EXPECT_EQ(count[0] + count[1] + count[2], 13);
  for (int c : count) EXPECT_TRUE(c == 4 || c == 5);
  EXPECT_EQ(t.backend_count(), 3u);
}

TEST(Maglev, EmptyTableHasNoBackend) {
  MaglevTable t = MaglevTable::build({}, 251);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.lookup(12345), MaglevTable::kNoBackend);
  MaglevTable default_constructed;
  EXPECT_EQ(default_constructed.lookup(0), MaglevTable::kNoBackend);
}

TEST(Maglev, RejectsBadInput) {
  auto names = backend_names(3);
  std::vector<MaglevBackend> in = {{names[0], 0}, {names[1], 1}};
  EXPECT_THROW(MaglevTable::build(in, 65536), std::invalid_argument);
  EXPECT_THROW(MaglevTable::build(in, 1), std::invalid_argument);
  std::vector<MaglevBackend> twice = {{names[0], 0}, {names[0], 1}};
  EXPECT_THROW(MaglevTable::build(twice, 251), std::invalid_argument);
  std::vector<MaglevBackend> reserved = {{names[0], MaglevTable::kNoBackend}};
  EXPECT_THROW(MaglevTable::build(reserved, 251), std::invalid_argument);
  auto many = backend_names(20);
  std::vector<MaglevBackend> too_many;
  for (std::size_t i = 0; i < many.size(); ++i) {
    too_many.push_back({many[i], static_cast<std::uint16_t>(i)});
  }
  EXPECT_THROW(MaglevTable::build(too_many, 13), std::invalid_argument);
}

// Tables of weighted backends named as backend_names(weights.size()) names them.
MaglevTable build_weighted(const std::vector<std::string>& names,
                           const std::vector<std::uint32_t>& weights, std::uint32_t size) {
  std::vector<MaglevBackend> in;
  for (std::size_t i = 0; i < names.size(); ++i) {
    in.push_back({names[i], static_cast<std::uint16_t>(i), weights[i]});
  }
  return MaglevTable::build(in, size);
}

std::vector<std::uint32_t> slot_counts(const MaglevTable& t, std::size_t backends) {
  std::vector<std::uint32_t> count(backends, 0);
  for (std::uint16_t b : t.slots()) ++count[b];
  return count;
}

double changed_share(const MaglevTable& a, const MaglevTable& b) {
  std::size_t changed = 0;
  for (std::size_t i = 0; i < a.slots().size(); ++i) changed += a.slots()[i] != b.slots()[i];
  return static_cast<double>(changed) / a.slots().size();
}

std::uint64_t fingerprint(std::span<const std::uint16_t> slots) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the slots' bytes, low byte first
  for (std::uint16_t v : slots) {
    h = (h ^ (v & 0xff)) * 1099511628211ull;
    h = (h ^ (v >> 8)) * 1099511628211ull;
  }
  return h;
}

// Fingerprints of the tables the unweighted fill built before weights existed: an upgrade must
// not move a single flow of a service whose backends all have the same weight.
TEST(MaglevWeights, EqualWeightsBuildTheTableOfBeforeWeightsExisted) {
  struct Pinned {
    int backends;
    std::uint32_t size;
    std::uint64_t fingerprint;
  };
  const Pinned pinned[] = {
      {1, 13, 0x51c3d7dd6796851bull},    {1, 65537, 0x84a27617a320b8fbull},
      {3, 13, 0x995bdd086f0da313ull},    {3, 1031, 0xe20bfa6bea84b301ull},
      {3, 65537, 0x6f41ebe6cf125db1ull}, {10, 13, 0xa8128b81ba597dd3ull},
      {10, 1031, 0xef06dc1073d1448aull}, {10, 65537, 0x00503b8eaa3ef2bfull},
      {37, 1031, 0x7a47ec5a3ec065f8ull}, {37, 65537, 0xaca535c11652b5d6ull},
  };
  for (const Pinned& p : pinned) {
    auto names = backend_names(p.backends);
    for (std::uint32_t w : {1u, 2u, 7u, 256u}) {
      std::vector<std::uint32_t> weights(names.size(), w);
      EXPECT_EQ(fingerprint(build_weighted(names, weights, p.size).slots()), p.fingerprint)
          << p.backends << " backends of weight " << w << ", size " << p.size;
    }
  }
}

TEST(MaglevWeights, SlotsFollowTheWeightsWithinABackendCountOfSlots) {
  const std::vector<std::vector<std::uint32_t>> cases = {
      {1, 2, 3}, {1, 256}, {5, 5, 1}, {256, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 0, 3, 1}};
  for (const auto& weights : cases) {
    auto names = backend_names(static_cast<int>(weights.size()));
    MaglevTable t = build_weighted(names, weights, MaglevTable::kDefaultSize);
    auto count = slot_counts(t, weights.size());
    double total = 0;
    for (std::uint32_t w : weights) total += w;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      double expected = MaglevTable::kDefaultSize * weights[i] / total;
      // The fill takes a slot when the credit allows; only the last, partial round and the
      // rounding of each backend's credit leave a difference, at most one slot per backend.
      EXPECT_NEAR(count[i], expected, static_cast<double>(weights.size()) + 1)
          << "backend " << i << " of weights case starting " << weights[0];
    }
  }
}

TEST(MaglevWeights, FlowsFollowTheWeights) {
  // The acceptance figure: 60,000 random flows over weights 1:2:3 land within 2 percentage
  // points of 1/6, 2/6, 3/6.
  auto names = backend_names(3);
  MaglevTable t = build_weighted(names, {1, 2, 3}, MaglevTable::kDefaultSize);
  auto flows = random_flow_hashes(60'000, 6);
  std::vector<std::uint32_t> count(3, 0);
  for (std::uint64_t h : flows) ++count[t.lookup(h)];
  double worst = 0;
  for (int i = 0; i < 3; ++i) {
    double share = static_cast<double>(count[i]) / flows.size();
    EXPECT_NEAR(share, (i + 1) / 6.0, 0.02) << "backend " << i;
    worst = std::max(worst, std::abs(share - (i + 1) / 6.0));
  }
  auto slots = slot_counts(t, 3);
  std::printf(
      "weights 1:2:3, 60000 flows: %.2f%% %.2f%% %.2f%% (worst error %.2f points); "
      "slots %u %u %u of %u\n",
      100.0 * count[0] / flows.size(), 100.0 * count[1] / flows.size(),
      100.0 * count[2] / flows.size(), 100 * worst, slots[0], slots[1], slots[2],
      MaglevTable::kDefaultSize);
}

TEST(MaglevWeights, WeightZeroTakesNoSlotAndMovesOnlyItsFlows) {
  auto names = backend_names(4);
  MaglevTable all = build_weighted(names, {1, 1, 1, 1}, MaglevTable::kDefaultSize);
  MaglevTable drained = build_weighted(names, {1, 1, 0, 1}, MaglevTable::kDefaultSize);
  MaglevTable removed = build_without(names, 2, MaglevTable::kDefaultSize);
  EXPECT_EQ(drained.backend_count(), 3u);
  EXPECT_EQ(slot_counts(drained, 4)[2], 0u);
  // Weight 0 is the backend's absence from the table, nothing else.
  EXPECT_TRUE(std::equal(drained.slots().begin(), drained.slots().end(), removed.slots().begin()));
  EXPECT_LT(changed_share(all, drained), 0.25 + 0.02);
}

TEST(MaglevWeights, EveryWeightZeroIsAnEmptyTable) {
  auto names = backend_names(2);
  MaglevTable t = build_weighted(names, {0, 0}, 251);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.backend_count(), 0u);
  EXPECT_EQ(t.lookup(42), MaglevTable::kNoBackend);
}

TEST(MaglevWeights, DisruptionOfAWeightChange) {
  // 3 backends, one goes from weight 1 to 2: its share goes 1/3 -> 1/2, so at least 1/6 of the
  // slots must change owner; report how many do, averaged over which backend is re-weighted.
  auto names = backend_names(3);
  MaglevTable before = build_weighted(names, {1, 1, 1}, MaglevTable::kDefaultSize);
  double sum = 0, worst = 0;
  for (int heavier = 0; heavier < 3; ++heavier) {
    std::vector<std::uint32_t> weights{1, 1, 1};
    weights[heavier] = 2;
    double changed =
        changed_share(before, build_weighted(names, weights, MaglevTable::kDefaultSize));
    EXPECT_GE(changed, 1 / 6.0 - 0.001);
    EXPECT_LT(changed, 0.30) << "re-weighting backend " << heavier;
    sum += changed;
    worst = std::max(worst, changed);
  }
  std::printf(
      "weight 1->2 of one of 3 backends: %.2f%% of slots change on average, %.2f%% at "
      "worst (the least possible is 16.67%%)\n",
      100 * sum / 3, 100 * worst);
}

TEST(FlowHash, SameTupleSameHashDifferentSeedDifferentHash) {
  ParsedPacket a;
  a.protocol = IPPROTO_UDP;
  a.src_address = {192, 0, 2, 1};
  a.dst_address = {10, 0, 0, 10};
  a.src_port = 40000;
  a.dst_port = 53;
  ParsedPacket b = a;
  b.hop_limit = 7;  // not part of the tuple
  b.l3_offset = 18;
  EXPECT_EQ(flow_hash(a, 1), flow_hash(b, 1));
  EXPECT_NE(flow_hash(a, 1), flow_hash(a, 2));
  b.src_port = 40001;
  EXPECT_NE(flow_hash(a, 1), flow_hash(b, 1));
  b = a;
  b.version = IpVersion::v6;
  EXPECT_NE(flow_hash(a, 1), flow_hash(b, 1));
}

TEST(MaglevReuse, ThePreviousTableIsSharedWhenItsBackendsWeightsAndSizeAreTheSame) {
  const std::vector<std::string> names = backend_names(4);
  std::vector<MaglevBackend> in;
  for (std::size_t i = 0; i < names.size(); ++i) {
    in.push_back({names[i], static_cast<std::uint16_t>(i), static_cast<std::uint32_t>(i + 1)});
  }
  const MaglevTable first = MaglevTable::build(in, 251);
  std::vector<MaglevBackend> reordered(in.rbegin(), in.rend());
  const MaglevTable same = MaglevTable::build(reordered, 251, first);
  EXPECT_TRUE(same.shares_slots_with(first)) << "the order of the list does not matter";
  EXPECT_EQ(same.slots().data(), first.slots().data());

  auto fresh_equal = [&](const std::vector<MaglevBackend>& b, std::uint32_t size) {
    const MaglevTable t = MaglevTable::build(b, size, first);
    EXPECT_FALSE(t.shares_slots_with(first));
    const MaglevTable fresh = MaglevTable::build(b, size);
    EXPECT_TRUE(
        std::equal(t.slots().begin(), t.slots().end(), fresh.slots().begin(), fresh.slots().end()));
  };
  std::vector<MaglevBackend> weight = in;
  weight[2].weight = 7;
  fresh_equal(weight, 251);
  std::vector<MaglevBackend> fewer(in.begin(), in.end() - 1);
  fresh_equal(fewer, 251);
  std::vector<MaglevBackend> index = in;
  std::swap(index[0].index, index[1].index);
  fresh_equal(index, 251);
  fresh_equal(in, 257);
  // A backend of weight 0 is not in the table: adding one changes nothing the table holds.
  std::vector<MaglevBackend> zero = in;
  zero.push_back({"10.0.9.9:53", 9, 0});
  EXPECT_TRUE(MaglevTable::build(zero, 251, first).shares_slots_with(first));
}

TEST(MaglevReuse, CopiesShareAndAMovedFromTableIsEmpty) {
  const std::vector<std::string> names = backend_names(3);
  std::vector<MaglevBackend> in;
  for (std::size_t i = 0; i < names.size(); ++i) {
    in.push_back({names[i], static_cast<std::uint16_t>(i)});
  }
  MaglevTable a = MaglevTable::build(in, 251);
  const MaglevTable copy = a;
  EXPECT_TRUE(copy.shares_slots_with(a));
  EXPECT_EQ(copy.lookup(12345ull << 40), a.lookup(12345ull << 40));
  MaglevTable moved = std::move(a);
  EXPECT_TRUE(moved.shares_slots_with(copy));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): what a moved-from table is
  EXPECT_EQ(a.lookup(1), MaglevTable::kNoBackend);
  EXPECT_EQ(moved.backend_count(), 3u);
}

}  // namespace
}  // namespace ferry::packet
