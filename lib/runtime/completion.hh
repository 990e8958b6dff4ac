// What an io_uring completion is routed to: every SQE the runtime submits carries a pointer to a
// Completion as user_data, and the worker that reaps the CQE calls its function.
#pragma once

#include <liburing.h>

#include <cstdint>

namespace ferry::runtime {

class Worker;

// A plain function pointer, not a virtual: one indirect call per completion, and the object
// (usually an awaiter in a task's frame) stays an aggregate the frame can hold.
struct Completion {
  using Fn = void (*)(Completion* self, Worker& worker, const io_uring_cqe& cqe);
  explicit Completion(Fn fn) : on_cqe(fn) {}
  Fn on_cqe;

  std::uint64_t user_data() { return reinterpret_cast<std::uintptr_t>(this); }
};

}  // namespace ferry::runtime
