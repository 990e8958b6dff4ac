// QuicLbService: a UDP payload to its server's backend, or the fallback reason; configuration
// checks at build time; the server ID map.
#include "lib/quic/quic_lb_service.hh"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/quic/quic_test_support.hh"

namespace ferry::quic {
namespace {

using test::hex;
using test::key_of;

class QuicLbServiceTest : public ::testing::TestWithParam<AesEngine> {
 protected:
  // Config 0: plaintext 2 + 6; config 1: four-pass 3 + 4 with the appendix key; config 2:
  // single-pass 8 + 8. Backends 0..2 have server IDs 0001, 0002 (config 0), ed793a (config 1);
  // backend 3 has ed793a51d49b8f5f (config 2).
  std::vector<LbConfig> configs() const {
    return {
        test::lb(0, 2, 6),
        test::lb(1, 3, 4, key_of("8f95f09245765f80256934e50c66207f")),
        test::lb(2, 8, 8, key_of("8f95f09245765f80256934e50c66207f")),
    };
  }
  std::vector<ServerIdEntry> servers() const {
    return {ServerIdEntry::make(hex("0001"), 0), ServerIdEntry::make(hex("0002"), 1),
            ServerIdEntry::make(hex("ed793a"), 2), ServerIdEntry::make(hex("ed793a51d49b8f5f"), 3)};
  }
  QuicLbService service() const {
    auto c = configs();
    auto s = servers();
    return QuicLbService(c, s, GetParam());
  }
};

std::vector<std::uint8_t> short_header(std::string_view dcid_hex) {
  auto p = hex("41");
  auto d = hex(dcid_hex);
  p.insert(p.end(), d.begin(), d.end());
  p.insert(p.end(), {0x11, 0x22, 0x33, 0x44});  // packet number and payload
  return p;
}

std::vector<std::uint8_t> long_header(std::string_view dcid_hex) {
  auto d = hex(dcid_hex);
  std::vector<std::uint8_t> p = {0xc0, 0, 0, 0, 1, static_cast<std::uint8_t>(d.size())};
  p.insert(p.end(), d.begin(), d.end());
  p.insert(p.end(), {0x00, 0x00});  // SCID length 0, token length 0
  return p;
}

TEST_P(QuicLbServiceTest, ShortHeadersRouteToTheirServersBackend) {
  QuicLbService s = service();
  QuicLbRoute r = s.route(short_header("070002aabbccddeeff"));
  EXPECT_EQ(r.outcome, QuicLbOutcome::routed);
  EXPECT_EQ(r.config_id, 0);
  EXPECT_EQ(r.backend, 1u);
  r = s.route(short_header("2720b1d07b359d3c"));  // appendix B four-pass vector, config 1
  EXPECT_TRUE(r.routed());
  EXPECT_EQ(r.config_id, 1);
  EXPECT_EQ(r.backend, 2u);
  r = s.route(short_header("504dd2d05a7b0de9b2b9907afb5ecf8cc3"));  // single-pass vector
  EXPECT_TRUE(r.routed());
  EXPECT_EQ(r.backend, 3u);
}

TEST_P(QuicLbServiceTest, LongHeadersRouteByTheDcidTheyDeclare) {
  QuicLbService s = service();
  QuicLbRoute r = s.route(long_header("070001aabbccddeeff"));
  EXPECT_TRUE(r.routed());
  EXPECT_EQ(r.backend, 0u);
  // A DCID shorter than the configuration's CID: the header says so, the packet may be longer.
  r = s.route(long_header("0700010203"));
  EXPECT_EQ(r.outcome, QuicLbOutcome::cid_too_short);
  EXPECT_EQ(r.config_id, 0);
  r = s.route(long_header(""));
  EXPECT_EQ(r.outcome, QuicLbOutcome::cid_too_short);
  EXPECT_EQ(r.config_id, QuicLbRoute::kNoConfig);
}

TEST_P(QuicLbServiceTest, EachFallbackHasItsReason) {
  QuicLbService s = service();
  EXPECT_EQ(s.route({}).outcome, QuicLbOutcome::not_quic);
  EXPECT_EQ(s.route(hex("c0000000")).outcome, QuicLbOutcome::truncated_header);
  EXPECT_EQ(s.route(hex("c00000000108aabb")).outcome, QuicLbOutcome::truncated_header);
  EXPECT_EQ(s.route(hex("8000000000080102030405060708")).outcome,
            QuicLbOutcome::version_negotiation);
  auto too_long = long_header("000102030405060708090a0b0c0d0e0f1011121314");  // 21
  EXPECT_EQ(s.route(too_long).outcome, QuicLbOutcome::dcid_too_long);
  QuicLbRoute r = s.route(short_header("e70001aabbccddeeff"));
  EXPECT_EQ(r.outcome, QuicLbOutcome::unroutable_codepoint);
  EXPECT_EQ(r.config_id, 7);
  r = s.route(short_header("a70001aabbccddeeff"));  // codepoint 5: not configured
  EXPECT_EQ(r.outcome, QuicLbOutcome::unknown_config);
  EXPECT_EQ(r.config_id, 5);
  r = s.route(hex("41070001aabbcc"));  // short header ends before the 9-octet CID
  EXPECT_EQ(r.outcome, QuicLbOutcome::cid_too_short);
  r = s.route(short_header("070009aabbccddeeff"));  // nobody has server ID 0009
  EXPECT_EQ(r.outcome, QuicLbOutcome::unknown_server_id);
  EXPECT_EQ(r.backend, QuicLbRoute::kNoBackend);
  EXPECT_EQ(s.route(hex("40")).outcome, QuicLbOutcome::cid_too_short);
}

// A server ID of two octets serves every configuration with server_id_bytes 2 (key rotation).
TEST_P(QuicLbServiceTest, AServerIdServesEveryConfigurationOfItsLength) {
  std::vector<LbConfig> c = {
      test::lb(3, 2, 6),
      test::lb(4, 2, 6, key_of("000102030405060708090a0b0c0d0e0f")),
  };
  std::vector<ServerIdEntry> servers = {ServerIdEntry::make(hex("abcd"), 9)};
  QuicLbService s(c, servers, GetParam());
  for (std::uint8_t id : {3, 4}) {
    std::uint8_t cid[kMaxCidBytes];
    s.codec(id)->encode(hex("abcd"), hex("010203040506"), 8, cid);
    std::vector<std::uint8_t> p = {0x40};
    p.insert(p.end(), cid, cid + 9);
    QuicLbRoute r = s.route(p);
    EXPECT_TRUE(r.routed()) << int{id};
    EXPECT_EQ(r.config_id, id);
    EXPECT_EQ(r.backend, 9u);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, QuicLbServiceTest, ::testing::ValuesIn(test::engines_to_test()),
                         test::engine_name);

TEST(QuicLbServiceBuild, RefusesWhatTheConfigValidatorAlsoRefuses) {
  std::vector<LbConfig> two_on_one = {test::lb(1, 2, 6), test::lb(1, 3, 6)};
  EXPECT_THROW(QuicLbService(two_on_one, {}, AesEngine::portable), std::invalid_argument);
  std::vector<LbConfig> one = {test::lb(0, 2, 6)};
  std::vector<ServerIdEntry> dup = {ServerIdEntry::make(hex("0001"), 0),
                                    ServerIdEntry::make(hex("0001"), 1)};
  EXPECT_THROW(QuicLbService(one, dup, AesEngine::portable), std::invalid_argument);
  std::vector<ServerIdEntry> wrong_length = {ServerIdEntry::make(hex("000102"), 0)};
  EXPECT_THROW(QuicLbService(one, wrong_length, AesEngine::portable), std::invalid_argument);
  std::vector<LbConfig> out_of_bounds = {test::lb(0, 2, 3)};
  EXPECT_THROW(QuicLbService(out_of_bounds, {}, AesEngine::portable), std::invalid_argument);
  EXPECT_THROW(ServerIdEntry::make({}, 0), std::invalid_argument);
  EXPECT_THROW(ServerIdEntry::make(hex("00112233445566778899aabbccddeeff"), 0),
               std::invalid_argument);
}

TEST(ServerIdMap, FindsEveryEntryAndNothingElse) {
  std::vector<ServerIdEntry> entries;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    std::uint8_t id[3] = {static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i), 0x5a};
    entries.push_back(ServerIdEntry::make(id, i));
  }
  entries.push_back(ServerIdEntry::make(hex("005a"), 5000));  // same octets, shorter: distinct
  ServerIdMap map(entries);
  EXPECT_EQ(map.size(), entries.size());
  for (const auto& e : entries) EXPECT_EQ(map.find(e.bytes.data(), e.length), e.backend);
  std::uint8_t absent[3] = {0xff, 0xff, 0x5a};
  EXPECT_EQ(map.find(absent, 3), ServerIdMap::kNotFound);
  EXPECT_EQ(map.find(absent, 0), ServerIdMap::kNotFound);
  EXPECT_EQ(map.find(absent, 16), ServerIdMap::kNotFound);
  EXPECT_EQ(ServerIdMap().find(absent, 3), ServerIdMap::kNotFound);
}

}  // namespace
}  // namespace ferry::quic
