// Threaded runtime under stress, in every io_ready mode: random mixes of spawn/yield/I-O
// resumption where every task must run exactly once in bounded time, wake ping-pong chains with
// infinite park timeouts (a lost wakeup would hang, not hiccup), and a backlog on one worker's
// run queue that the others must steal in batches.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "lib/runtime/io.hh"
#include "lib/runtime/runtime.hh"
#include "tests/unit/runtime/test_support.hh"

namespace ferry::runtime {
namespace {

using testing::Countdown;
using namespace std::chrono_literals;

constexpr auto kDeadline = 60s;

RuntimeConfig threaded(std::uint32_t workers, IoReadyMode mode) {
  RuntimeConfig config;
  config.workers = workers;
  config.io_ready = mode;
  config.park_timeout_ms = -1;  // a lost wakeup must hang the test, not be papered over
  config.check_parking = true;
  return config;
}

struct Gauntlet {
  explicit Gauntlet(std::size_t max_tasks) : ran(max_tasks), done(max_tasks) {}
  std::vector<std::atomic<int>> ran;
  std::atomic<std::size_t> next_id{0};
  std::atomic<std::size_t> spawned{0};
  Countdown done;
  std::size_t max_tasks() const { return ran.size(); }
};

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

// A task whose ops come from its seed: yield, a NOP through the ring, or spawning a child.
Task scripted(Runtime& runtime, Gauntlet& g, std::size_t id, std::uint64_t seed) {
  std::uint64_t s = mix(seed + id);
  const int ops = static_cast<int>(s % 6);
  for (int op = 0; op < ops; ++op) {
    s = mix(s);
    switch (s % 3) {
      case 0:
        co_await yield_now();
        break;
      case 1:
        co_await nop();
        break;
      case 2: {
        // Reserve an id before spawning so the total never passes the budget.
        std::size_t child = g.next_id.fetch_add(1);
        if (child < g.max_tasks()) {
          g.spawned.fetch_add(1);
          runtime.spawn(scripted(runtime, g, child, seed));
        }
        break;
      }
    }
  }
  g.ran[id].fetch_add(1);
  g.done.count();
}

void run_gauntlet(IoReadyMode mode, std::uint32_t workers) {
  constexpr std::size_t kMaxTasks = 30000;
  constexpr std::size_t kRoots = 3000;
  Gauntlet g(kMaxTasks);
  Runtime runtime(threaded(workers, mode));
  runtime.start();
  g.next_id.store(kRoots);
  for (std::size_t id = 0; id < kRoots; ++id) {
    g.spawned.fetch_add(1);
    runtime.spawn(scripted(runtime, g, id, 42 + workers));
  }
  // Ids handed out past the budget never spawn: count them as done.
  ASSERT_TRUE([&] {
    auto until = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < until) {
      const std::size_t spawned = g.spawned.load();
      const std::size_t finished = kMaxTasks - g.done.remaining();
      if (finished == spawned && runtime.live_tasks() == 0) return true;
      g.done.wait_for(5ms);
    }
    return false;
  }()) << "mode "
       << to_string(mode) << " W=" << workers << ": " << runtime.live_tasks()
       << " tasks never finished";
  runtime.stop();
  std::size_t wrong = 0;
  for (std::size_t id = 0; id < g.spawned.load(); ++id) wrong += g.ran[id].load() != 1;
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(runtime.lost_wakeups(), 0u);
  std::uint64_t run = 0;
  for (std::uint32_t w = 0; w < workers; ++w) run += runtime.counters(w).tasks_run.value();
  EXPECT_GE(run, g.spawned.load());
}

class SchedulerGauntlet : public ::testing::TestWithParam<std::tuple<IoReadyMode, std::uint32_t>> {
};

TEST_P(SchedulerGauntlet, EveryTaskRunsExactlyOnce) {
  run_gauntlet(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Modes, SchedulerGauntlet,
                         ::testing::Combine(::testing::Values(IoReadyMode::inbox,
                                                              IoReadyMode::global,
                                                              IoReadyMode::index),
                                            ::testing::Values(1u, 2u, 4u)),
                         [](const auto& info) {
                           return std::string(to_string(std::get<0>(info.param))) + "_W" +
                                  std::to_string(std::get<1>(info.param));
                         });

// A chain hops from task to task by spawning its successor (sometimes after a NOP or a yield):
// each hop is work appearing on one worker while others sleep or search.
Task hop(Runtime& runtime, Countdown& done, int left) {
  if (left % 3 == 0) co_await nop();
  if (left % 5 == 0) co_await yield_now();
  if (left == 0) {
    done.count();
    co_return;
  }
  runtime.spawn(hop(runtime, done, left - 1));
}

class WakeupGauntlet : public ::testing::TestWithParam<IoReadyMode> {};

TEST_P(WakeupGauntlet, ChainsOfSpawnsNeverStrandWork) {
  constexpr int kChains = 6;
  constexpr int kHops = 20000;
  Runtime runtime(threaded(4, GetParam()));
  runtime.start();
  Countdown done(kChains);
  for (int c = 0; c < kChains; ++c) runtime.spawn(hop(runtime, done, kHops));
  ASSERT_TRUE(done.wait_for(kDeadline)) << done.remaining() << " chains stuck";
  runtime.stop();
  EXPECT_EQ(runtime.lost_wakeups(), 0u);
  EXPECT_EQ(runtime.live_tasks(), 0u);
}

Task ping(Countdown& pong) {
  co_await nop();
  pong.count();
}

// Ping-pong with a thread outside the runtime: every round waits until every worker is asleep,
// then spawns one task and waits for it, so each round needs a wake to get anywhere. With no park
// timeout, one lost wake hangs the test.
bool all_asleep(const Runtime& runtime) {
  const auto until = std::chrono::steady_clock::now() + kDeadline;
  while (runtime.parked_workers() != runtime.worker_count()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST_P(WakeupGauntlet, EveryRoundWakesASleepingWorker) {
  constexpr int kRounds = 2000;
  Runtime runtime(threaded(4, GetParam()));
  runtime.start();
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_TRUE(all_asleep(runtime)) << "round " << round << ": a worker never went to sleep";
    Countdown pong(1);
    runtime.spawn(ping(pong));
    ASSERT_TRUE(pong.wait_for(kDeadline)) << "round " << round << " was never picked up";
  }
  runtime.stop();
  EXPECT_EQ(runtime.lost_wakeups(), 0u);
  // Every round woke a sleeper, which went back to sleep before the next round began.
  std::uint64_t parks = 0;
  for (std::uint32_t w = 0; w < 4; ++w) parks += runtime.counters(w).parks.value();
  EXPECT_GE(parks, static_cast<std::uint64_t>(kRounds));
}

INSTANTIATE_TEST_SUITE_P(Modes, WakeupGauntlet,
                         ::testing::Values(IoReadyMode::inbox, IoReadyMode::global,
                                           IoReadyMode::index),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- backlog ----

void spin_for(std::chrono::microseconds how_long) {
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
  }
}

struct Backlog {
  explicit Backlog(std::size_t tasks) : ran_on(tasks), done(tasks) {
    for (auto& r : ran_on) r.store(-1);
  }
  std::vector<std::atomic<int>> ran_on;
  Countdown done;
  std::atomic<int> home{-1};          // the producer's worker
  std::atomic<int> ran_elsewhere{0};  // tasks that ran on another worker: stolen ones
};

// On the producer's worker a task holds that worker until a stolen task has run elsewhere, so the
// backlog is still there when a thief comes, however late the scheduler runs it.
Task busy(Backlog& b, std::size_t id) {
  const auto worker = static_cast<int>(current_worker()->index());
  if (worker == b.home.load()) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    while (b.ran_elsewhere.load() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
  } else {
    b.ran_elsewhere.fetch_add(1);
  }
  spin_for(200us);
  b.ran_on[id].store(worker);
  b.done.count();
  co_return;
}

Task producer(Runtime& runtime, Backlog& b) {
  b.home.store(static_cast<int>(current_worker()->index()));
  // All children land on this worker's run queue at once: a backlog only stealing can spread.
  for (std::size_t id = 0; id < b.ran_on.size(); ++id) runtime.spawn(busy(b, id));
  co_return;
}

TEST(Backlog, OneWorkersBacklogIsBatchStolenByTheOthers) {
  constexpr std::size_t kTasks = 200;
  constexpr std::uint32_t kWorkers = 4;
  Backlog b(kTasks);
  Runtime runtime(threaded(kWorkers, IoReadyMode::inbox));
  runtime.start();
  runtime.spawn(producer(runtime, b));
  ASSERT_TRUE(b.done.wait_for(kDeadline));
  runtime.stop();

  const auto home = static_cast<std::uint32_t>(b.home.load());
  SCOPED_TRACE(runtime.workers_json().dump());
  std::set<int> workers_used;
  for (auto& r : b.ran_on) workers_used.insert(r.load());
  EXPECT_EQ(workers_used.count(-1), 0u);
  EXPECT_GE(workers_used.size(), 2u);
  std::uint64_t steals = 0;
  std::uint64_t stolen = 0;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    if (w == home) continue;
    steals += runtime.counters(w).deque_steals.value();
    stolen += runtime.counters(w).deque_stolen_tasks.value();
  }
  EXPECT_GE(steals, 1u);
  EXPECT_GT(stolen, steals) << "steals moved one task at a time, not batches";
  EXPECT_GE(stolen, kTasks / 4);  // the first steal alone takes half of what is queued
  EXPECT_EQ(runtime.lost_wakeups(), 0u);
}

}  // namespace
}  // namespace ferry::runtime
