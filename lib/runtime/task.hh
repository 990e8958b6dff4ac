// A runtime task: a C++20 coroutine whose frame holds the whole state of one unit of work (a
// connection handler, a test script). The runtime owns every spawned frame until it finishes.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <utility>

namespace ferry::runtime {

class Runtime;

// The scheduler's view of a task; lives in the coroutine's promise, so queues link frames
// directly and scheduling never allocates.
struct TaskHeader {
  TaskHeader* next = nullptr;       // link in the one queue the task is in (deque slots excepted)
  TaskHeader* live_prev = nullptr;  // the runtime's list of live frames (for teardown)
  TaskHeader* live_next = nullptr;
  Runtime* runtime = nullptr;  // set when spawned
  std::coroutine_handle<> handle;
  void resume() { handle.resume(); }
};

class Task {
 public:
  struct promise_type {
    TaskHeader header;
    Task get_return_object() noexcept {
      header.handle = std::coroutine_handle<promise_type>::from_promise(*this);
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    // Nothing runs until a worker picks the task up.
    std::suspend_always initial_suspend() noexcept { return {}; }
    // The frame frees itself when the body returns.
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    // Data-plane code does not throw; a task that does is a bug worth a core dump.
    void unhandled_exception() noexcept { std::terminate(); }
    ~promise_type();
  };
  using Handle = std::coroutine_handle<promise_type>;

  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();  // never spawned: never started, nothing to undo
  }

  bool valid() const { return static_cast<bool>(handle_); }
  // Hands the frame over (to the runtime).
  TaskHeader* release() { return &std::exchange(handle_, {}).promise().header; }

 private:
  explicit Task(Handle handle) : handle_(handle) {}
  Handle handle_;
};

// The header of the task an awaiter suspends.
inline TaskHeader* header_of(std::coroutine_handle<Task::promise_type> handle) {
  return &handle.promise().header;
}

}  // namespace ferry::runtime
