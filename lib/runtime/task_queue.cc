// FIFO queues of tasks linked through their headers (see task_queue.hh).
#include "lib/runtime/task_queue.hh"

namespace ferry::runtime {

bool TaskQueue::push(TaskHeader* task) {
  task->next = nullptr;
  std::lock_guard lock(mutex_);
  const bool was_empty = head_ == nullptr;
  if (tail_ != nullptr) {
    tail_->next = task;
  } else {
    head_ = task;
  }
  tail_ = task;
  len_.store(len_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  return was_empty;
}

bool TaskQueue::push_all(TaskList& batch) {
  if (batch.empty()) return false;
  const std::size_t n = batch.size();
  std::lock_guard lock(mutex_);
  const bool was_empty = head_ == nullptr;
  if (tail_ != nullptr) {
    tail_->next = batch.head();
  } else {
    head_ = batch.head();
  }
  tail_ = batch.tail();
  len_.store(len_.load(std::memory_order_relaxed) + n, std::memory_order_seq_cst);
  batch.clear();
  return was_empty;
}

TaskHeader* TaskQueue::pop() {
  if (len_.load(std::memory_order_seq_cst) == 0) return nullptr;
  std::lock_guard lock(mutex_);
  TaskHeader* task = head_;
  if (task == nullptr) return nullptr;
  head_ = task->next;
  if (head_ == nullptr) tail_ = nullptr;
  task->next = nullptr;
  len_.store(len_.load(std::memory_order_relaxed) - 1, std::memory_order_seq_cst);
  return task;
}

std::size_t TaskQueue::pop_batch(std::size_t max, TaskList& out) {
  if (max == 0 || len_.load(std::memory_order_seq_cst) == 0) return 0;
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  while (n < max && head_ != nullptr) {
    TaskHeader* task = head_;
    head_ = task->next;
    out.push(task);
    ++n;
  }
  if (head_ == nullptr) tail_ = nullptr;
  len_.store(len_.load(std::memory_order_relaxed) - n, std::memory_order_seq_cst);
  return n;
}

}  // namespace ferry::runtime
