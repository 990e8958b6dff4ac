// Encode then decode returns the server ID, for every length the draft allows (server ID 1..15,
// nonce 4..18, sum at most 19), plaintext and encrypted, on both AES engines; and the encrypted
// forms really hide the server ID (a ciphertext differs from its plaintext).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "lib/quic/cid_codec.hh"
#include "tests/unit/quic/quic_test_support.hh"

namespace ferry::quic {
namespace {

struct Mode {
  bool keyed;
  AesEngine engine;
};

class CidCodecRoundTrip : public ::testing::TestWithParam<Mode> {};

TEST_P(CidCodecRoundTrip, EveryLengthCombinationDecodesToItsServerId) {
  std::mt19937 rng(2021);
  auto fill = [&](std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng());
  };
  int combinations = 0;
  for (std::uint8_t sid = kMinServerIdBytes; sid <= kMaxServerIdBytes; ++sid) {
    for (std::uint8_t nonce = kMinNonceBytes; nonce <= kMaxNonceBytes; ++nonce) {
      if (sid + nonce > kMaxPlaintextBytes) continue;
      ++combinations;
      for (int trial = 0; trial < 16; ++trial) {
        LbConfig c = test::lb(static_cast<std::uint8_t>(trial % kConfigIdCount), sid, nonce);
        if (GetParam().keyed) {
          AesKey key;
          fill(key.data(), key.size());
          c.key = key;
        }
        CidCodec codec(c, GetParam().engine);
        std::uint8_t server_id[kMaxServerIdBytes], nonce_bytes[kMaxNonceBytes];
        fill(server_id, sid);
        fill(nonce_bytes, nonce);
        std::uint8_t cid[kMaxCidBytes];
        const auto low_bits = static_cast<std::uint8_t>(rng() & 0x1f);
        codec.encode({server_id, sid}, {nonce_bytes, nonce}, low_bits, cid);
        ASSERT_EQ(config_id_of(cid[0]), c.config_id);
        ASSERT_EQ(cid[0] & 0x1f, low_bits);
        std::uint8_t decoded[kMaxServerIdBytes] = {};
        codec.decode(cid, decoded);
        ASSERT_EQ(test::to_hex(decoded, sid), test::to_hex(server_id, sid))
            << "server_id_bytes " << int{sid} << " nonce_bytes " << int{nonce} << " "
            << to_string(codec.algorithm());
        if (GetParam().keyed) {
          // The nonce changes the CID, and the CID does not carry the plaintext.
          std::uint8_t plain[kMaxCidBytes];
          std::memcpy(plain, server_id, sid);
          std::memcpy(plain + sid, nonce_bytes, nonce);
          ASSERT_NE(std::memcmp(cid + 1, plain, sid + nonce), 0);
        }
      }
    }
  }
  // 15 server ID lengths; for each, the nonce lengths from 4 up to 19 - sid (none for 16+).
  EXPECT_EQ(combinations, 15 + 14 + 13 + 12 + 11 + 10 + 9 + 8 + 7 + 6 + 5 + 4 + 3 + 2 + 1);
}

std::vector<Mode> modes() {
  std::vector<Mode> out{{false, AesEngine::portable}};
  for (AesEngine e : test::engines_to_test()) out.push_back({true, e});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Forms, CidCodecRoundTrip, ::testing::ValuesIn(modes()),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return std::string(info.param.keyed ? "encrypted_" : "plaintext_") +
                                  std::string(to_string(info.param.engine));
                         });

// The two engines produce the same CIDs, so a server on one and ferry on the other agree.
TEST(CidCodecEngines, AesNiAndPortableEncodeAlike) {
  if (!cpu_has_aesni()) GTEST_SKIP() << "this CPU has no AES-NI to compare with";
  std::mt19937 rng(5);
  for (std::uint8_t sid = 1; sid <= 15; ++sid) {
    const std::uint8_t nonce = static_cast<std::uint8_t>(std::max(4, 16 - sid));
    if (sid + nonce > 19) continue;
    AesKey key;
    for (auto& b : key) b = static_cast<std::uint8_t>(rng());
    LbConfig c = test::lb(2, sid, nonce, key);
    CidCodec ni(c, AesEngine::aesni), portable(c, AesEngine::portable);
    std::uint8_t server_id[15], nonce_bytes[18], a[20], b[20];
    for (auto& v : server_id) v = static_cast<std::uint8_t>(rng());
    for (auto& v : nonce_bytes) v = static_cast<std::uint8_t>(rng());
    ni.encode({server_id, sid}, {nonce_bytes, nonce}, 0, a);
    portable.encode({server_id, sid}, {nonce_bytes, nonce}, 0, b);
    ASSERT_EQ(test::to_hex(a, ni.cid_bytes()), test::to_hex(b, portable.cid_bytes()));
  }
}

}  // namespace
}  // namespace ferry::quic
