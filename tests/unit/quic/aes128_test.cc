// AES-128 on both engines against FIPS-197's examples and the AES outputs of the QUIC-LB draft's
// worked example; the engine switch (FERRY_QUIC_AESNI) resolved as a forced fallback would be.
#include "lib/quic/aes128.hh"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "tests/unit/quic/quic_test_support.hh"

namespace ferry::quic {
namespace {

using test::hex;
using test::key_of;
using test::to_hex;

class Aes128Engines : public ::testing::TestWithParam<AesEngine> {};

std::string encrypt_hex(const Aes128& aes, std::string_view plain) {
  auto in = hex(plain);
  std::uint8_t out[16];
  aes.encrypt(in.data(), out);
  return to_hex(out, 16);
}

std::string decrypt_hex(const Aes128& aes, std::string_view cipher) {
  auto in = hex(cipher);
  std::uint8_t out[16];
  aes.decrypt(in.data(), out);
  return to_hex(out, 16);
}

TEST_P(Aes128Engines, Fips197AppendixCVector) {
  Aes128 aes(key_of("000102030405060708090a0b0c0d0e0f"), GetParam());
  EXPECT_EQ(aes.engine(), GetParam());
  EXPECT_EQ(encrypt_hex(aes, "00112233445566778899aabbccddeeff"),
            "69c4e0d86a7b0430d8cdb78070b4c55a");
  EXPECT_EQ(decrypt_hex(aes, "69c4e0d86a7b0430d8cdb78070b4c55a"),
            "00112233445566778899aabbccddeeff");
}

TEST_P(Aes128Engines, Fips197AppendixBVector) {
  Aes128 aes(key_of("2b7e151628aed2a6abf7158809cf4f3c"), GetParam());
  EXPECT_EQ(encrypt_hex(aes, "3243f6a8885a308d313198a2e0370734"),
            "3925841d02dc09fbdc118597196a0b32");
  EXPECT_EQ(decrypt_hex(aes, "3925841d02dc09fbdc118597196a0b32"),
            "3243f6a8885a308d313198a2e0370734");
}

// The four AES outputs of draft-ietf-quic-load-balancers-21 section 5.4.2.4 (steps 3, 6, 8, 10).
TEST_P(Aes128Engines, QuicLbDraftExampleBlocks) {
  Aes128 aes(key_of("fdf726a9893ec05c0632d3956680baf0"), GetParam());
  EXPECT_EQ(encrypt_hex(aes, "31441a90000000000000000000000701"),
            "a255dd8cdacf01948d3a848c3c7fee23");
  EXPECT_EQ(encrypt_hex(aes, "0e3c1ff9000000000000000000000702"),
            "e5e452cb9e1bedb0b2bf830506bf4c4e");
  EXPECT_EQ(encrypt_hex(aes, "d4a04850000000000000000000000703"),
            "b7821ab3024fed0913b6a04d18e3216f");
  EXPECT_EQ(encrypt_hex(aes, "09be054a000000000000000000000704"),
            "b334357cfdf81e3fafe180154eaf7378");
}

TEST_P(Aes128Engines, EncryptInPlaceThenDecryptRoundTrips) {
  std::mt19937 rng(29);
  for (int i = 0; i < 200; ++i) {
    AesKey key;
    for (auto& b : key) b = static_cast<std::uint8_t>(rng());
    Aes128 aes(key, GetParam());
    std::uint8_t block[16], original[16];
    for (auto& b : block) b = static_cast<std::uint8_t>(rng());
    std::memcpy(original, block, 16);
    aes.encrypt(block, block);
    EXPECT_NE(std::memcmp(block, original, 16), 0);
    aes.decrypt(block, block);
    EXPECT_EQ(std::memcmp(block, original, 16), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, Aes128Engines, ::testing::ValuesIn(test::engines_to_test()),
                         test::engine_name);

TEST(Aes128, EnginesAgreeOnRandomBlocks) {
  if (!cpu_has_aesni()) GTEST_SKIP() << "this CPU has no AES-NI to compare with";
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    AesKey key;
    for (auto& b : key) b = static_cast<std::uint8_t>(rng());
    Aes128 ni(key, AesEngine::aesni), portable(key, AesEngine::portable);
    std::uint8_t in[16], a[16], b[16];
    for (auto& v : in) v = static_cast<std::uint8_t>(rng());
    ni.encrypt(in, a);
    portable.encrypt(in, b);
    ASSERT_EQ(to_hex(a, 16), to_hex(b, 16));
    ni.decrypt(in, a);
    portable.decrypt(in, b);
    ASSERT_EQ(to_hex(a, 16), to_hex(b, 16));
  }
}

const char* env_off(const char*) {
  return "0";
}
const char* env_on(const char*) {
  return "1";
}
const char* env_auto(const char*) {
  return "auto";
}
const char* env_unset(const char*) {
  return nullptr;
}
const char* env_bad(const char*) {
  return "fast";
}

TEST(AesEngineSwitch, ZeroForcesThePortableEngine) {
  EXPECT_EQ(choose_aes_engine(env_off), AesEngine::portable);
}

TEST(AesEngineSwitch, AutoAndUnsetFollowTheCpu) {
  const AesEngine expected = cpu_has_aesni() ? AesEngine::aesni : AesEngine::portable;
  EXPECT_EQ(choose_aes_engine(env_auto), expected);
  EXPECT_EQ(choose_aes_engine(env_unset), expected);
}

TEST(AesEngineSwitch, OneRequiresAesNi) {
  if (cpu_has_aesni()) {
    EXPECT_EQ(choose_aes_engine(env_on), AesEngine::aesni);
  } else {
    EXPECT_THROW(choose_aes_engine(env_on), std::runtime_error);
  }
}

// Run once as is and once with FERRY_QUIC_AESNI=0 (tests/unit/quic/meson.build), as a CPU
// without AES-NI would be: the default engine follows the environment.
TEST(AesEngineSwitch, TheProcessEnvironmentDecides) {
  const char* forced = std::getenv("FERRY_QUIC_AESNI");
  const AesEngine engine = choose_aes_engine();
  if (forced != nullptr && std::string_view(forced) == "0") {
    EXPECT_EQ(engine, AesEngine::portable);
  } else if (forced == nullptr) {
    EXPECT_EQ(engine, cpu_has_aesni() ? AesEngine::aesni : AesEngine::portable);
  }
  Aes128 aes(key_of("000102030405060708090a0b0c0d0e0f"), engine);
  EXPECT_EQ(encrypt_hex(aes, "00112233445566778899aabbccddeeff"),
            "69c4e0d86a7b0430d8cdb78070b4c55a");
}

TEST(AesEngineSwitch, OtherValuesAreRejected) {
  EXPECT_THROW(choose_aes_engine(env_bad), std::runtime_error);
}

}  // namespace
}  // namespace ferry::quic
