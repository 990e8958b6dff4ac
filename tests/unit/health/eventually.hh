// Polls for what the health checker's thread makes true: its progress is observable only through
// its snapshots and the board, so the tests await it rather than sleep a fixed time.
#pragma once

#include <chrono>
#include <thread>

namespace ferry::health::test {

template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done();
}

}  // namespace ferry::health::test
