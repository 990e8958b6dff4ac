// run_guarded() catches what escapes a thread's body; request_fatal_stop() asks the supervisor to
// stop with status 70 by raising SIGTERM at the process.
#include "lib/common/thread_guard.hh"

#include <gtest/gtest.h>
#include <signal.h>

#include <stdexcept>
#include <thread>

namespace ferry {
namespace {

TEST(RunGuarded, ReturnsNulloptWhenTheBodyReturns) {
  int ran = 0;
  EXPECT_FALSE(run_guarded("test", [&] { ++ran; }));
  EXPECT_EQ(ran, 1);
}

TEST(RunGuarded, ReturnsTheTextOfAStdException) {
  auto failure = run_guarded("test", [] { throw std::runtime_error("type must be string"); });
  ASSERT_TRUE(failure);
  EXPECT_EQ(*failure, "type must be string");
}

TEST(RunGuarded, CatchesWhatIsNotAStdException) {
  auto failure = run_guarded("test", [] { throw 42; });
  ASSERT_TRUE(failure);
  EXPECT_NE(failure->find("not a std::exception"), std::string::npos);
}

TEST(RunGuarded, KeepsAThreadFromTerminatingTheProcess) {
  std::optional<std::string> failure;
  std::thread t([&] { failure = run_guarded("worker", [] { throw std::logic_error("bug"); }); });
  t.join();
  ASSERT_TRUE(failure);
  EXPECT_EQ(*failure, "bug");
}

TEST(FatalStop, RaisesSigtermAtTheProcessAndRecordsStatus70) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, nullptr), 0);  // as ferryd's supervisor does
  EXPECT_EQ(fatal_stop_status(), 0);
  std::thread t([] { request_fatal_stop("health checker", "test"); });
  t.join();
  timespec wait{5, 0};
  EXPECT_EQ(sigtimedwait(&term, nullptr, &wait), SIGTERM);
  EXPECT_EQ(fatal_stop_status(), 70);
}

}  // namespace
}  // namespace ferry
