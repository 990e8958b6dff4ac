// UmemArea: one populated anonymous mapping of frames x frame_bytes, hugepages optional.
#include "lib/xsk/umem_area.hh"

#include <gtest/gtest.h>

#include <cstdint>
#include <system_error>
#include <utility>

namespace ferry::xsk {
namespace {

TEST(UmemArea, MapsFramesTimesFrameBytesWritable) {
  UmemArea area(64, 4096, HugePages::off);
  ASSERT_NE(area.data(), nullptr);
  EXPECT_EQ(area.size_bytes(), 64u * 4096);
  EXPECT_FALSE(area.on_hugepages());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(area.data()) % 4096, 0u);
  area.data()[area.size_bytes() - 1] = std::byte{0x5a};
  EXPECT_EQ(area.bytes().back(), std::byte{0x5a});
}

TEST(UmemArea, AutomaticHugepagesFallBackToBasePages) {
  UmemArea area(16, 2048, HugePages::automatic);  // works with or without reserved hugepages
  EXPECT_EQ(area.size_bytes(), 16u * 2048);
  area.data()[0] = std::byte{1};
}

TEST(UmemArea, MoveTransfersTheMappingOnce) {
  UmemArea a(8, 4096, HugePages::off);
  std::byte* p = a.data();
  UmemArea b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size_bytes(), 0u);
}

TEST(UmemArea, EmptyAreaIsRejected) {
  EXPECT_THROW(UmemArea(0, 4096, HugePages::off), std::system_error);
}

}  // namespace
}  // namespace ferry::xsk
