// UmemArea: one populated shared mapping of a memfd of frames x frame_bytes, hugepages optional;
// a second area over the same memfd (a handover) sees the same pages.
#include "lib/xsk/umem_area.hh"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>

#include "lib/common/unique_fd.hh"

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

// A handover: the successor maps the same memfd, so both see the very same pages.
TEST(UmemArea, IsAMemfdThatASecondAreaMapsAsTheSamePages) {
  UmemArea first(16, 4096, HugePages::off);
  ASSERT_GE(first.memfd(), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(first.memfd(), &st), 0);
  EXPECT_GE(static_cast<std::size_t>(st.st_size), first.size_bytes());

  UniqueFd copy(::fcntl(first.memfd(), F_DUPFD_CLOEXEC, 0));
  ASSERT_TRUE(copy);
  UmemArea second(std::move(copy), first.size_bytes(), first.on_hugepages());
  ASSERT_NE(second.data(), nullptr);
  EXPECT_NE(second.data(), first.data()) << "a mapping of its own";
  EXPECT_EQ(second.size_bytes(), first.size_bytes());
  EXPECT_GE(second.memfd(), 0);

  // What one writes, the other reads, both ways, at the start and in the last frame.
  first.data()[0] = std::byte{0xa1};
  first.data()[first.size_bytes() - 1] = std::byte{0xa2};
  EXPECT_EQ(second.data()[0], std::byte{0xa1});
  EXPECT_EQ(second.data()[second.size_bytes() - 1], std::byte{0xa2});
  second.data()[5 * 4096 + 17] = std::byte{0xb7};
  EXPECT_EQ(first.data()[5 * 4096 + 17], std::byte{0xb7});
}

TEST(UmemArea, TheSecondAreaKeepsThePagesWhenTheFirstIsGone) {
  std::optional<UmemArea> first(std::in_place, 8, 4096, HugePages::off);
  std::memset(first->data(), 0x3c, first->size_bytes());
  UniqueFd copy(::fcntl(first->memfd(), F_DUPFD_CLOEXEC, 0));
  ASSERT_TRUE(copy);
  UmemArea second(std::move(copy), first->size_bytes(), false);
  first.reset();  // the old ferryd exits
  for (std::size_t i = 0; i < second.size_bytes(); i += 4095) {
    ASSERT_EQ(second.data()[i], std::byte{0x3c}) << i;
  }
}

TEST(UmemArea, MoveCarriesTheMemfd) {
  UmemArea a(8, 4096, HugePages::off);
  int fd = a.memfd();
  UmemArea b(std::move(a));
  EXPECT_EQ(b.memfd(), fd);
  EXPECT_EQ(a.memfd(), -1);
}

TEST(UmemArea, AHandedOverFdThatCannotBeMappedThrows) {
  UniqueFd not_memory(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(not_memory);
  EXPECT_THROW(UmemArea(std::move(not_memory), 8 * 4096, false), std::system_error);
}

}  // namespace
}  // namespace ferry::xsk
