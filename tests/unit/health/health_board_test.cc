// HealthBoard: flags start up, listeners hear each change once, retain drops only the unlisted.
#include "lib/health/health_board.hh"

#include <gtest/gtest.h>

namespace ferry::health {
namespace {

net::Endpoint ep(const char* text) { return *net::Endpoint::parse(text); }

TEST(HealthBoard, BackendStartsUpAndUnchecked) {
  HealthBoard board;
  auto state = board.state("dns", ep("10.0.0.1:53"));
  EXPECT_TRUE(state->up.load());
  EXPECT_FALSE(state->checked.load());
}

TEST(HealthBoard, ListenerHearsEachChangeOnce) {
  HealthBoard board;
  std::vector<std::tuple<std::string, std::string, bool>> heard;
  board.subscribe([&](const std::string& s, const net::Endpoint& b, bool up) {
    heard.emplace_back(s, b.to_string(), up);
  });
  auto state = board.state("dns", ep("10.0.0.1:53"));
  EXPECT_FALSE(board.set_up("dns", ep("10.0.0.1:53"), true));  // already up: no change
  EXPECT_TRUE(board.set_up("dns", ep("10.0.0.1:53"), false));
  EXPECT_FALSE(board.set_up("dns", ep("10.0.0.1:53"), false));
  EXPECT_FALSE(state->up.load());  // the holder's pointer sees the flag
  EXPECT_TRUE(board.set_up("dns", ep("10.0.0.1:53"), true));
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], std::make_tuple(std::string("dns"), std::string("10.0.0.1:53"), false));
  EXPECT_EQ(heard[1], std::make_tuple(std::string("dns"), std::string("10.0.0.1:53"), true));
}

TEST(HealthBoard, RetainDropsUnlistedBackendsButHoldersKeepTheirFlag) {
  HealthBoard board;
  auto kept = board.state("dns", ep("10.0.0.1:53"));
  auto dropped = board.state("dns", ep("10.0.0.2:53"));
  board.set_up("dns", ep("10.0.0.2:53"), false);
  board.retain({{"dns", ep("10.0.0.1:53")}});
  auto entries = board.snapshot();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].backend.to_string(), "10.0.0.1:53");
  EXPECT_FALSE(dropped->up.load());
  // Re-adding starts afresh (up), not from the dropped state.
  EXPECT_TRUE(board.state("dns", ep("10.0.0.2:53"))->up.load());
}

}  // namespace
}  // namespace ferry::health
