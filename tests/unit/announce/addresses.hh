// Addresses written as text in the announce tests.
#pragma once

#include <gtest/gtest.h>

#include "lib/common/net.hh"

namespace ferry::announce {

inline net::IpAddress ip(const char* text) {
  auto a = net::IpAddress::parse(text);
  EXPECT_TRUE(a) << text;
  return a.value_or(net::IpAddress{});
}

}  // namespace ferry::announce
