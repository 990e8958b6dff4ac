// The runtime's building blocks on their own: the local run queue and its batch steal, the
// shared task queues, the ready-worker index and its listed flags, the mailbox, the idle gate,
// and the io_ready environment switches.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lib/runtime/idle.hh"
#include "lib/runtime/local_queue.hh"
#include "lib/runtime/mailbox.hh"
#include "lib/runtime/ready_index.hh"
#include "lib/runtime/runtime.hh"
#include "lib/runtime/task_queue.hh"

namespace ferry::runtime {
namespace {

std::vector<TaskHeader> headers(std::size_t n) {
  return std::vector<TaskHeader>(n);
}

TEST(LocalQueue, PopsInPushOrder) {
  auto h = headers(3);
  LocalQueue q;
  for (auto& t : h) ASSERT_TRUE(q.push(&t));
  EXPECT_EQ(q.len(), 3u);
  EXPECT_EQ(q.pop(), &h[0]);
  EXPECT_EQ(q.pop(), &h[1]);
  EXPECT_EQ(q.pop(), &h[2]);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(LocalQueue, RefusesPushWhenFull) {
  auto h = headers(LocalQueue::kCapacity + 1);
  LocalQueue q;
  for (std::uint32_t i = 0; i < LocalQueue::kCapacity; ++i) ASSERT_TRUE(q.push(&h[i]));
  EXPECT_FALSE(q.push(&h.back()));
  EXPECT_EQ(q.pop(), &h[0]);
  EXPECT_TRUE(q.push(&h.back()));  // one slot free again (and the ring wraps)
  EXPECT_EQ(q.len(), LocalQueue::kCapacity);
}

TEST(LocalQueue, StealTakesHalfRoundedUpAndReturnsTheLast) {
  auto h = headers(9);
  LocalQueue victim;
  LocalQueue thief;
  for (auto& t : h) ASSERT_TRUE(victim.push(&t));
  std::uint32_t moved = 0;
  TaskHeader* got = victim.steal_into(thief, moved);
  EXPECT_EQ(moved, 5u);  // 9 - 9/2
  EXPECT_EQ(got, &h[4]);
  EXPECT_EQ(thief.len(), 4u);
  EXPECT_EQ(victim.len(), 4u);
  EXPECT_EQ(thief.pop(), &h[0]);  // the oldest went to the thief
  EXPECT_EQ(victim.pop(), &h[5]);
}

TEST(LocalQueue, StealOfOneTask) {
  auto h = headers(1);
  LocalQueue victim;
  LocalQueue thief;
  ASSERT_TRUE(victim.push(&h[0]));
  std::uint32_t moved = 0;
  EXPECT_EQ(victim.steal_into(thief, moved), &h[0]);
  EXPECT_EQ(moved, 1u);
  EXPECT_TRUE(thief.empty());
  EXPECT_EQ(victim.steal_into(thief, moved), nullptr);
  EXPECT_EQ(moved, 0u);
}

TEST(LocalQueue, StealRefusedWhenThiefHasNoRoomForHalf) {
  auto h = headers(LocalQueue::kCapacity + 4);
  LocalQueue victim;
  LocalQueue thief;
  for (std::uint32_t i = 0; i < LocalQueue::kCapacity / 2 + 1; ++i) ASSERT_TRUE(thief.push(&h[i]));
  ASSERT_TRUE(victim.push(&h[LocalQueue::kCapacity]));
  std::uint32_t moved = 0;
  EXPECT_EQ(victim.steal_into(thief, moved), nullptr);
  EXPECT_EQ(victim.len(), 1u);
}

// The owner pushes and pops while thieves steal: every task comes out exactly once.
TEST(LocalQueue, ConcurrentStealsLoseAndDuplicateNothing) {
  constexpr std::size_t kTasks = 200000;
  constexpr int kThieves = 3;
  auto h = headers(kTasks);
  std::vector<std::atomic<int>> seen(kTasks);
  LocalQueue owner;
  std::vector<LocalQueue> thief_queues(kThieves);
  std::atomic<bool> done{false};
  std::atomic<std::size_t> taken{0};
  auto take = [&](TaskHeader* t) {
    seen[static_cast<std::size_t>(t - h.data())].fetch_add(1);
    taken.fetch_add(1);
  };
  std::vector<std::thread> thieves;
  for (int i = 0; i < kThieves; ++i) {
    thieves.emplace_back([&, i] {
      LocalQueue& mine = thief_queues[i];
      while (!done.load() || !owner.empty()) {
        std::uint32_t moved = 0;
        if (TaskHeader* t = owner.steal_into(mine, moved)) take(t);
        while (TaskHeader* t = mine.pop()) take(t);
      }
    });
  }
  std::size_t next = 0;
  while (next < kTasks) {
    for (int burst = 0; burst < 64 && next < kTasks; ++burst) {
      if (!owner.push(&h[next])) break;
      ++next;
    }
    if (TaskHeader* t = owner.pop()) take(t);
  }
  while (TaskHeader* t = owner.pop()) take(t);
  done.store(true);
  for (auto& t : thieves) t.join();
  EXPECT_EQ(taken.load(), kTasks);
  std::size_t wrong = 0;
  for (auto& s : seen) wrong += s.load() != 1;
  EXPECT_EQ(wrong, 0u);
}

TEST(TaskQueue, ReportsTheEmptyToNonEmptyTransition) {
  auto h = headers(4);
  TaskQueue q;
  EXPECT_TRUE(q.push(&h[0]));
  EXPECT_FALSE(q.push(&h[1]));
  TaskList batch;
  batch.push(&h[2]);
  batch.push(&h[3]);
  EXPECT_FALSE(q.push_all(batch));
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(q.len(), 4u);
  TaskList out;
  EXPECT_EQ(q.pop_batch(3, out), 3u);
  EXPECT_EQ(out.pop(), &h[0]);
  EXPECT_EQ(out.pop(), &h[1]);
  EXPECT_EQ(out.pop(), &h[2]);
  EXPECT_EQ(q.pop(), &h[3]);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.push(&h[0]));  // empty again: the next push is a transition again
}

TEST(ReadyIndex, ListsAWorkerOnceUntilPopped) {
  ReadyIndex index(4);
  EXPECT_TRUE(index.list(2));
  EXPECT_FALSE(index.list(2));  // the listed flag keeps duplicates out
  EXPECT_TRUE(index.list(0));
  EXPECT_TRUE(index.listed(2));
  EXPECT_EQ(index.pop(), 2u);
  EXPECT_FALSE(index.listed(2));
  EXPECT_TRUE(index.list(2));  // popped: may be listed again
  EXPECT_EQ(index.pop(), 0u);
  EXPECT_EQ(index.pop(), 2u);
  EXPECT_EQ(index.pop(), std::nullopt);
  EXPECT_TRUE(index.empty());
}

TEST(ReadyIndex, ConcurrentListAndPopNeverExceedsOneEntryPerWorker) {
  constexpr std::uint32_t kWorkers = 8;
  ReadyIndex index(kWorkers);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> pops{0};
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50000; ++i) index.list((t * 7 + i) % kWorkers);
    });
  }
  std::thread popper([&] {
    while (!stop.load()) {
      if (index.pop()) pops.fetch_add(1);
    }
  });
  for (auto& t : threads) t.join();
  stop.store(true);
  popper.join();
  std::set<std::uint32_t> left;
  while (auto id = index.pop()) {
    EXPECT_TRUE(left.insert(*id).second) << "worker " << *id;
  }
  EXPECT_LE(left.size(), kWorkers);
  EXPECT_GT(pops.load() + left.size(), 0u);
}

TEST(Mailbox, DeliversEveryRequestFromManyProducers) {
  constexpr int kProducers = 4;
  constexpr int kEach = 20000;
  std::vector<HomeRequest> requests(kProducers * kEach);
  Mailbox mailbox;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i) mailbox.push(&requests[p * kEach + i]);
    });
  }
  std::set<HomeRequest*> got;
  while (got.size() < requests.size()) {
    if (HomeRequest* r = mailbox.pop()) {
      EXPECT_TRUE(got.insert(r).second);
    }
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(mailbox.pop(), nullptr);
  EXPECT_TRUE(mailbox.empty());
}

TEST(Idle, WakesOnlyWhenNobodySearches) {
  Idle idle(3);
  EXPECT_EQ(idle.worker_to_notify(), std::nullopt);  // everybody is awake
  EXPECT_FALSE(idle.transition_to_parked(2, /*searching=*/false));
  EXPECT_FALSE(idle.transition_to_parked(1, /*searching=*/false));
  EXPECT_EQ(idle.unparked(), 1u);
  std::optional<std::uint32_t> first = idle.worker_to_notify();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(idle.searching(), 1u);                   // the woken worker searches
  EXPECT_EQ(idle.worker_to_notify(), std::nullopt);  // gated: a searcher is out already
  EXPECT_FALSE(idle.is_parked(*first));
  EXPECT_TRUE(idle.transition_from_searching());  // it was the last searcher
  EXPECT_TRUE(idle.worker_to_notify().has_value());
}

TEST(Idle, AtMostHalfTheWorkersSearch) {
  Idle idle(4);
  EXPECT_TRUE(idle.transition_to_searching());
  EXPECT_TRUE(idle.transition_to_searching());
  EXPECT_FALSE(idle.transition_to_searching());
  EXPECT_FALSE(idle.transition_from_searching());
  EXPECT_TRUE(idle.transition_to_parked(0, /*searching=*/true));  // last searcher parks
  EXPECT_EQ(idle.searching(), 0u);
  EXPECT_TRUE(idle.is_parked(0));
  EXPECT_TRUE(idle.unpark_worker_by_id(0));
  EXPECT_FALSE(idle.unpark_worker_by_id(0));
  EXPECT_EQ(idle.unparked(), 4u);
}

TEST(IoReadyEnvironment, SelectsTheModeAndRefusesBoth) {
  auto none = [](const char*) -> const char* { return nullptr; };
  auto global = [](const char* n) -> const char* {
    return std::string(n) == "FERRY_TASK_GLOBAL_IO_READY" ? "1" : nullptr;
  };
  auto index = [](const char* n) -> const char* {
    return std::string(n) == "FERRY_TASK_IO_READY_INDEX" ? "1" : nullptr;
  };
  auto off = [](const char* n) -> const char* {
    return std::string(n) == "FERRY_TASK_IO_READY_INDEX" ? "0" : nullptr;
  };
  auto both = [](const char*) -> const char* { return "1"; };
  EXPECT_EQ(io_ready_with_env(IoReadyMode::index, none), IoReadyMode::index);
  EXPECT_EQ(io_ready_with_env(IoReadyMode::inbox, global), IoReadyMode::global);
  EXPECT_EQ(io_ready_with_env(IoReadyMode::inbox, index), IoReadyMode::index);
  EXPECT_EQ(io_ready_with_env(IoReadyMode::global, off), IoReadyMode::global);
  EXPECT_THROW(io_ready_with_env(IoReadyMode::inbox, both), std::invalid_argument);
  auto drain = [](const char* n) -> const char* {
    return std::string(n) == "FERRY_TASK_INDEX_DRAIN" ? "2" : nullptr;
  };
  auto bad = [](const char*) -> const char* { return "0"; };
  EXPECT_EQ(index_drain_with_env(4, none), 4u);
  EXPECT_EQ(index_drain_with_env(4, drain), 2u);
  EXPECT_THROW(index_drain_with_env(4, bad), std::invalid_argument);
  EXPECT_EQ(to_string(IoReadyMode::index), "index");
}

}  // namespace
}  // namespace ferry::runtime
