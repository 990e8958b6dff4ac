// A worker's mailbox of home requests: work that only that worker may do (touch its buffer ring,
// its receive engine, its sockets' receive state), posted by tasks running elsewhere. Lock-free
// multi-producer, single-consumer (Dmitry Vyukov's intrusive MPSC queue); the requests live in
// the posting task's frame, so posting never allocates.
#pragma once

#include <atomic>

namespace ferry::runtime {

class Worker;

struct HomeRequest {
  using Fn = void (*)(HomeRequest* self, Worker& home);
  explicit HomeRequest(Fn fn = nullptr) : run(fn) {}
  std::atomic<HomeRequest*> next{nullptr};
  Fn run;
};

class Mailbox {
 public:
  Mailbox() : head_(&stub_), tail_(&stub_) {}
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Any thread. The caller must wake the owner afterwards.
  void push(HomeRequest* request) {
    request->next.store(nullptr, std::memory_order_relaxed);
    HomeRequest* prev = tail_.exchange(request, std::memory_order_acq_rel);
    prev->next.store(request, std::memory_order_release);
  }

  // Owner only. Null when empty, and also while a push is half done (the pusher's wake follows).
  HomeRequest* pop() {
    HomeRequest* head = head_;
    HomeRequest* next = head->next.load(std::memory_order_acquire);
    if (head == &stub_) {
      if (next == nullptr) return nullptr;
      head_ = next;
      head = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      head_ = next;
      return head;
    }
    if (head != tail_.load(std::memory_order_acquire)) return nullptr;  // a push is in progress
    push(&stub_);
    next = head->next.load(std::memory_order_acquire);
    if (next != nullptr) {
      head_ = next;
      return head;
    }
    return nullptr;
  }

  // Owner only (reads head_); any thread may call maybe_nonempty().
  bool empty() const {
    return head_ == &stub_ && stub_.next.load(std::memory_order_acquire) == nullptr &&
           tail_.load(std::memory_order_acquire) == &stub_;
  }
  bool maybe_nonempty() const {
    return tail_.load(std::memory_order_seq_cst) != &stub_ ||
           stub_.next.load(std::memory_order_seq_cst) != nullptr;
  }

 private:
  HomeRequest stub_;
  HomeRequest* head_;  // consumer side
  alignas(64) std::atomic<HomeRequest*> tail_;
};

}  // namespace ferry::runtime
