// TCP control authentication: the token file's checks, the comparison, the auth line, and the
// per-source failure limit.
#include "lib/control/tcp_auth.hh"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ferry::control {
namespace {

class TokenFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ferry-token-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& content, mode_t mode) {
    std::string path = dir_ + "/token";
    std::ofstream(path, std::ios::trunc) << content;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }

  std::string error_of(const std::string& path) {
    try {
      read_token_file(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "accepted";
  }

  std::string dir_;
};

TEST_F(TokenFile, StripsTrailingNewlines) {
  EXPECT_EQ(read_token_file(write("s3cret\n", 0600)), "s3cret");
  EXPECT_EQ(read_token_file(write("s3cret\r\n", 0400)), "s3cret");
  EXPECT_EQ(read_token_file(write("two words", 0600)), "two words");
}

TEST_F(TokenFile, RefusesFilesOthersCanRead) {
  std::string path = write("s3cret\n", 0644);
  EXPECT_EQ(error_of(path), "control.tcp.token_file " + path +
                                ": mode 0644 lets group or others read the token; chmod 600 " +
                                path);
  EXPECT_NE(error_of(write("s3cret\n", 0640)).find("mode 0640"), std::string::npos);
}

TEST_F(TokenFile, RefusesMissingAndEmptyFiles) {
  EXPECT_NE(error_of(dir_ + "/absent").find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(write("", 0600)).find("is empty"), std::string::npos);
  EXPECT_NE(error_of(write("\n", 0600)).find("is empty"), std::string::npos);
  EXPECT_NE(error_of(dir_).find("not a regular file"), std::string::npos);
}

TEST(TokenMatches, OnlyTheExactTokenMatches) {
  EXPECT_TRUE(token_matches("s3cret", "s3cret"));
  EXPECT_FALSE(token_matches("s3cret", "s3creT"));
  EXPECT_FALSE(token_matches("s3cret", "s3cre"));
  EXPECT_FALSE(token_matches("s3cret", "s3cret\n"));
  EXPECT_FALSE(token_matches("s3cret", ""));
  EXPECT_FALSE(token_matches("a", std::string_view("a\0", 2)));
}

TEST(AuthLine, IsAnObjectWithOnlyAStringAuth) {
  EXPECT_EQ(parse_auth_line(R"({"auth":"s3cret"})"), "s3cret");
  EXPECT_EQ(parse_auth_line(R"( {"auth":""} )"), "");
  EXPECT_FALSE(parse_auth_line(R"({"auth":"s3cret","cmd":"status"})"));
  EXPECT_FALSE(parse_auth_line(R"({"auth":7})"));
  EXPECT_FALSE(parse_auth_line(R"({"cmd":"status"})"));
  EXPECT_FALSE(parse_auth_line("s3cret"));
  EXPECT_FALSE(parse_auth_line(std::string(10000, '[')));
}

TEST(AuthFailureLimiter, BlocksASourceAfterMaxFailuresWithinTheWindow) {
  using namespace std::chrono_literals;
  AuthFailureLimiter limiter(5, 10s);
  auto t0 = AuthFailureLimiter::Clock::time_point{} + 1h;
  for (int i = 0; i < 4; ++i) limiter.record_failure("tcp 192.0.2.1", t0 + i * 1s);
  EXPECT_FALSE(limiter.blocked("tcp 192.0.2.1", t0 + 4s));
  limiter.record_failure("tcp 192.0.2.1", t0 + 4s);
  EXPECT_TRUE(limiter.blocked("tcp 192.0.2.1", t0 + 4s));
  EXPECT_FALSE(limiter.blocked("tcp 192.0.2.2", t0 + 4s));
  EXPECT_TRUE(limiter.blocked("tcp 192.0.2.1", t0 + 9s));
  // The first failure leaves the window at t0 + 10s.
  EXPECT_FALSE(limiter.blocked("tcp 192.0.2.1", t0 + 10s));
}

TEST(AuthFailureLimiter, TracksABoundedNumberOfSources) {
  using namespace std::chrono_literals;
  AuthFailureLimiter limiter(5, 10s, 3);
  auto t0 = AuthFailureLimiter::Clock::time_point{} + 1h;
  for (int i = 0; i < 10; ++i) limiter.record_failure("tcp 192.0.2." + std::to_string(i), t0);
  EXPECT_LE(limiter.tracked_sources(), 3u);
}

}  // namespace
}  // namespace ferry::control
