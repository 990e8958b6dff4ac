// FIFO queues of tasks linked through their headers: TaskList for one thread's private batches,
// TaskQueue (mutex + length word) for the queues several workers touch: every worker's I/O inbox,
// the global I/O queue and the injection queue for spawns from outside the workers.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include "lib/runtime/task.hh"

namespace ferry::runtime {

// Not thread-safe: a batch being assembled or drained by one thread.
class TaskList {
 public:
  bool empty() const { return head_ == nullptr; }
  std::size_t size() const { return size_; }
  void push(TaskHeader* task) {
    task->next = nullptr;
    if (tail_ != nullptr) {
      tail_->next = task;
    } else {
      head_ = task;
    }
    tail_ = task;
    ++size_;
  }
  TaskHeader* pop() {
    TaskHeader* task = head_;
    if (task == nullptr) return nullptr;
    head_ = task->next;
    if (head_ == nullptr) tail_ = nullptr;
    task->next = nullptr;
    --size_;
    return task;
  }
  TaskHeader* head() const { return head_; }
  TaskHeader* tail() const { return tail_; }
  void clear() {
    head_ = tail_ = nullptr;
    size_ = 0;
  }

 private:
  TaskHeader* head_ = nullptr;
  TaskHeader* tail_ = nullptr;
  std::size_t size_ = 0;
};

// Multi-producer, multi-consumer FIFO. The lock is held for a few pointer writes; batches move
// under one acquisition. len() reads a word without the lock, so searchers skip empty queues
// without touching the mutex.
class TaskQueue {
 public:
  // Both return true when the queue was empty before: the empty -> non-empty transition the
  // ready-worker index records.
  bool push(TaskHeader* task);
  bool push_all(TaskList& batch);  // leaves `batch` empty

  TaskHeader* pop();
  // Moves up to `max` tasks to `out`; returns how many.
  std::size_t pop_batch(std::size_t max, TaskList& out);

  std::size_t len() const { return len_.load(std::memory_order_seq_cst); }
  bool empty() const { return len() == 0; }

 private:
  mutable std::mutex mutex_;
  TaskHeader* head_ = nullptr;
  TaskHeader* tail_ = nullptr;
  std::atomic<std::size_t> len_{0};
};

}  // namespace ferry::runtime
