// Deterministic single-step mode: one thread drives every worker step by step, so a fixed
// workload gives exact scheduler counters (steals, index pops, wakes, parks...).
#include <gtest/gtest.h>

#include <vector>

#include "lib/runtime/io.hh"
#include "lib/runtime/runtime.hh"

namespace ferry::runtime {
namespace {

using StepResult = Worker::StepResult;

RuntimeConfig step_config(std::uint32_t workers, IoReadyMode mode) {
  RuntimeConfig config;
  config.workers = workers;
  config.io_ready = mode;
  config.step_mode = true;
  config.check_parking = true;
  return config;
}

Task yielding(int yields, int& done) {
  for (int i = 0; i < yields; ++i) co_await yield_now();
  ++done;
}

Task trivial(int& done) {
  ++done;
  co_return;
}

Task one_nop(int& done) {
  const int rc = co_await nop();
  if (rc == 0) ++done;
}

Task spawner(Runtime& runtime, int children, int& done) {
  for (int i = 0; i < children; ++i) runtime.spawn(trivial(done));
  ++done;
  co_return;
}

// Steps `worker` until it parks; returns the steps that ran a task.
int run_until_parked(Runtime& runtime, std::uint32_t worker) {
  int ran = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    const StepResult r = runtime.step(worker);
    if (r == StepResult::parked) return ran;
    if (r == StepResult::ran) ++ran;
  }
  ADD_FAILURE() << "worker " << worker << " never parked";
  return ran;
}

TEST(StepMode, OneWorkerRunsEveryYieldThenParksOnce) {
  Runtime runtime(step_config(1, IoReadyMode::inbox));
  runtime.start();
  int done = 0;
  for (int i = 0; i < 10; ++i) runtime.spawn_on(0, yielding(3, done));
  EXPECT_EQ(run_until_parked(runtime, 0), 40);
  EXPECT_EQ(done, 10);
  const WorkerCounters& c = runtime.counters(0);
  EXPECT_EQ(c.tasks_run.value(), 40u);
  EXPECT_EQ(c.parks.value(), 1u);
  EXPECT_EQ(c.deque_steals.value(), 0u);
  EXPECT_EQ(c.victim_inbox_attempts.value(), 0u);  // no other worker to look at
  EXPECT_EQ(c.wakes.value(), 0u);
  EXPECT_EQ(runtime.live_tasks(), 0u);
  EXPECT_EQ(runtime.lost_wakeups(), 0u);
}

TEST(StepMode, BacklogIsStolenHalfAtATime) {
  Runtime runtime(step_config(2, IoReadyMode::inbox));
  runtime.start();
  int done = 0;
  for (int i = 0; i < 64; ++i) runtime.spawn_on(0, trivial(done));

  // Worker 1 has nothing: it steals half of worker 0's 64 in one batch and runs one of them.
  EXPECT_EQ(runtime.step(1), StepResult::ran);
  EXPECT_EQ(runtime.counters(1).deque_steals.value(), 1u);
  EXPECT_EQ(runtime.counters(1).deque_stolen_tasks.value(), 32u);
  EXPECT_EQ(runtime.counters(1).tasks_run.value(), 1u);
  EXPECT_EQ(done, 1);

  // Worker 1 runs its 31 and steals on: half of worker 0's 32 (16), then of what is left...
  EXPECT_EQ(run_until_parked(runtime, 1), 63);
  EXPECT_EQ(runtime.counters(1).deque_steals.value(), 7u);  // 32, 16, 8, 4, 2, 1, 1
  EXPECT_EQ(runtime.counters(1).deque_stolen_tasks.value(), 64u);
  EXPECT_EQ(runtime.counters(1).victim_inbox_attempts.value(), 1u);  // before parking
  EXPECT_EQ(runtime.counters(1).parks.value(), 1u);
  EXPECT_EQ(run_until_parked(runtime, 0), 0);
  EXPECT_EQ(done, 64);
  EXPECT_EQ(runtime.counters(0).tasks_run.value(), 0u);
  EXPECT_EQ(runtime.counters(0).parks.value(), 1u);
  EXPECT_EQ(runtime.lost_wakeups(), 0u);
}

TEST(StepMode, InboxModeCompletionIsStolenByScanningVictims) {
  Runtime runtime(step_config(2, IoReadyMode::inbox));
  runtime.start();
  int done = 0;
  runtime.spawn_on(0, one_nop(done));
  EXPECT_EQ(runtime.run_one(0), StepResult::ran);  // queues the NOP
  runtime.poll(0);                                 // the completion lands in worker 0's inbox
  EXPECT_EQ(runtime.step(1), StepResult::ran);     // worker 1 finds it by scanning
  EXPECT_EQ(done, 1);
  const WorkerCounters& thief = runtime.counters(1);
  EXPECT_EQ(thief.victim_inbox_attempts.value(), 1u);
  EXPECT_EQ(thief.inbox_steals.value(), 1u);
  EXPECT_EQ(thief.inbox_stolen_tasks.value(), 1u);
  EXPECT_EQ(thief.index_pops.value(), 0u);
  EXPECT_EQ(runtime.counters(0).io_completions.value(), 1u);
  EXPECT_EQ(runtime.counters(0).tasks_run.value(), 1u);
}

TEST(StepMode, IndexModeCompletionIsFoundThroughTheIndex) {
  Runtime runtime(step_config(2, IoReadyMode::index));
  runtime.start();
  int done = 0;
  runtime.spawn_on(0, one_nop(done));
  EXPECT_EQ(runtime.run_one(0), StepResult::ran);
  runtime.poll(0);
  EXPECT_EQ(runtime.step(1), StepResult::ran);
  EXPECT_EQ(done, 1);
  const WorkerCounters& thief = runtime.counters(1);
  EXPECT_EQ(thief.index_pops.value(), 1u);
  EXPECT_EQ(thief.index_stale_pops.value(), 0u);
  EXPECT_EQ(thief.victim_inbox_attempts.value(), 0u);  // no scan needed
  EXPECT_EQ(thief.inbox_steals.value(), 1u);
}

TEST(StepMode, IndexEntryLeftByAnOwnerThatDrainedItselfIsStale) {
  Runtime runtime(step_config(2, IoReadyMode::index));
  runtime.start();
  int done = 0;
  runtime.spawn_on(0, one_nop(done));
  EXPECT_EQ(runtime.run_one(0), StepResult::ran);
  runtime.poll(0);                                 // listed as ready
  EXPECT_EQ(runtime.run_one(0), StepResult::ran);  // ...but runs its inbox itself
  EXPECT_EQ(done, 1);
  EXPECT_EQ(runtime.step(1), StepResult::parked);
  const WorkerCounters& searcher = runtime.counters(1);
  EXPECT_EQ(searcher.index_pops.value(), 1u);
  EXPECT_EQ(searcher.index_stale_pops.value(), 1u);
  EXPECT_EQ(searcher.victim_inbox_attempts.value(), 1u);  // the fallback scan
  EXPECT_EQ(searcher.parks.value(), 1u);
}

// index_drain tasks move per index pop; work left behind re-lists the victim.
void run_drain(std::uint32_t drain, std::uint64_t expect_pops) {
  RuntimeConfig config = step_config(2, IoReadyMode::index);
  config.index_drain = drain;
  Runtime runtime(config);
  runtime.start();
  int done = 0;
  for (int i = 0; i < 6; ++i) runtime.spawn_on(0, one_nop(done));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(runtime.run_one(0), StepResult::ran);
  runtime.poll(0);  // six completions in worker 0's inbox, one index entry
  EXPECT_EQ(run_until_parked(runtime, 1), 6);
  EXPECT_EQ(done, 6);
  const WorkerCounters& thief = runtime.counters(1);
  EXPECT_EQ(thief.index_pops.value(), expect_pops) << "drain " << drain;
  EXPECT_EQ(thief.index_stale_pops.value(), 0u);
  EXPECT_EQ(thief.inbox_steals.value(), expect_pops);
  EXPECT_EQ(thief.inbox_stolen_tasks.value(), 6u);
  EXPECT_EQ(thief.victim_inbox_attempts.value(), 1u);  // one fallback scan before parking
}

TEST(StepMode, IndexDrainOfFourTakesTwoPops) {
  run_drain(4, 2);
}
TEST(StepMode, IndexDrainOfOneTakesOnePopPerTask) {
  run_drain(1, 6);
}

TEST(StepMode, GlobalModeCompletionsGoThroughTheGlobalQueue) {
  Runtime runtime(step_config(2, IoReadyMode::global));
  runtime.start();
  int done = 0;
  runtime.spawn_on(0, one_nop(done));
  runtime.spawn_on(0, one_nop(done));
  EXPECT_EQ(runtime.run_one(0), StepResult::ran);
  EXPECT_EQ(runtime.run_one(0), StepResult::ran);
  runtime.poll(0);
  EXPECT_EQ(runtime.step(1), StepResult::ran);
  EXPECT_EQ(runtime.step(0), StepResult::ran);
  EXPECT_EQ(done, 2);
  EXPECT_EQ(runtime.counters(1).global_queue_pops.value(), 1u);
  EXPECT_EQ(runtime.counters(0).global_queue_pops.value(), 1u);
  EXPECT_EQ(runtime.counters(1).victim_inbox_attempts.value(), 0u);
  EXPECT_EQ(runtime.counters(1).inbox_steals.value(), 0u);
}

TEST(StepMode, SpawnWakesAParkedWorkerOnlyWhenNobodySearches) {
  Runtime runtime(step_config(3, IoReadyMode::inbox));
  runtime.start();
  EXPECT_EQ(runtime.step(1), StepResult::parked);
  EXPECT_EQ(runtime.step(2), StepResult::parked);
  int done = 0;
  runtime.spawn_on(0, spawner(runtime, 2, done));
  // The first child appears on worker 0 while nobody searches: one sleeper is woken, and counts
  // as searching from then on, so the second child wakes nobody.
  EXPECT_EQ(runtime.step(0), StepResult::ran);
  EXPECT_EQ(runtime.counters(0).wakes.value(), 1u);
  // The woken worker (the last to park, 2) searches and steals a child. Leaving the search as
  // the last searcher, it hands the search on: the other sleeper is woken too.
  EXPECT_EQ(runtime.step(2), StepResult::ran);
  EXPECT_EQ(runtime.counters(2).deque_steals.value(), 1u);
  EXPECT_EQ(runtime.counters(2).wakes.value(), 1u);
  EXPECT_EQ(runtime.step(1), StepResult::ran);  // and steals the other child
  EXPECT_EQ(runtime.counters(1).deque_steals.value(), 1u);
  EXPECT_EQ(done, 3);
  EXPECT_EQ(runtime.step(1), StepResult::parked);
  EXPECT_EQ(runtime.counters(1).parks.value(), 2u);
  EXPECT_EQ(runtime.lost_wakeups(), 0u);
}

TEST(StepMode, SameWorkloadGivesTheSameCounters) {
  auto run = [] {
    Runtime runtime(step_config(3, IoReadyMode::index));
    runtime.start();
    int done = 0;
    for (int i = 0; i < 30; ++i) {
      runtime.spawn_on(i % 3, i % 2 ? one_nop(done) : yielding(i % 4, done));
    }
    for (int round = 0; round < 200; ++round) {
      for (std::uint32_t w = 0; w < 3; ++w) runtime.step(w);
    }
    EXPECT_EQ(done, 30);
    return runtime.workers_json();
  };
  const auto first = run();
  EXPECT_EQ(first, run());
}

TEST(StepMode, UnfinishedTasksAreFreedWithTheRuntime) {
  int done = 0;
  {
    Runtime runtime(step_config(1, IoReadyMode::inbox));
    runtime.start();
    runtime.spawn_on(0, yielding(5, done));
    runtime.spawn_on(0, one_nop(done));
    EXPECT_EQ(runtime.step(0), StepResult::ran);
    EXPECT_EQ(runtime.live_tasks(), 2u);
  }  // ASan would report the frames if they leaked
  EXPECT_EQ(done, 0);
}

}  // namespace
}  // namespace ferry::runtime
