// QUIC-LB through process_frame(): a request whose connection ID names a backend's server ID goes
// to that backend whatever its 4-tuple, in the plaintext, single-pass and four-pass forms; every
// other request falls back to the 4-tuple (flow table and Maglev), counted by why.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "lib/fastpath/flow_table.hh"
#include "lib/fastpath/frame_processor.hh"
#include "lib/packet/parse.hh"
#include "lib/quic/cid_codec.hh"
#include "tests/unit/fastpath/lab_tables.hh"
#include "tests/unit/fastpath/quic_packets.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using packet::test::build_frame;
using quic::QuicLbOutcome;

const std::vector<std::string> kBackends = {"10.2.0.2:53", "10.2.0.3:53", "10.2.0.4:53"};

struct Form {
  const char* name;
  std::uint8_t server_id_bytes;
  std::uint8_t nonce_bytes;
  bool keyed;
};

class QuicChoiceTest : public ::testing::TestWithParam<Form> {
 protected:
  // The lab's balanced service with QUIC-LB on codepoint 1, server IDs 0x11.., 0x22.., 0x33..
  config::Config quic_config() {
    config::Config c = lab_config(kBackends);
    config::QuicLbConfigEntry e;
    e.id = 1;
    e.server_id_bytes = GetParam().server_id_bytes;
    e.nonce_bytes = GetParam().nonce_bytes;
    if (GetParam().keyed) {
      e.key = std::array<std::uint8_t, 16>{0x8f, 0x95, 0xf0, 0x92, 0x45, 0x76, 0x5f, 0x80,
                                           0x25, 0x69, 0x34, 0xe5, 0x0c, 0x66, 0x20, 0x7f};
    }
    use_quic_lb(c.services[0], e);
    return c;
  }
  void use(const config::Config& c, packet::ServiceTableOptions options = {}) {
    config_ = c;
    snapshot_ = snapshot(config_tables(c, options), next_hop_tables());
  }
  // A 1-RTT (short header) packet whose DCID a server with backend `b`'s server ID issued.
  std::vector<std::uint8_t> short_header(std::size_t b, std::uint8_t nonce_seed = 7) {
    return test::short_header(config_.services[0], b, nonce_seed);
  }
  // An Initial as a client sends it first: the DCID is 8 random octets of its own.
  std::vector<std::uint8_t> client_initial(std::uint8_t seed) {
    std::vector<std::uint8_t> p = {0xc0, 0, 0, 0, 1, 8};
    for (std::uint8_t i = 0; i < 8; ++i) p.push_back(static_cast<std::uint8_t>(seed * 31 + i));
    p.push_back(0);  // SCID length
    p.resize(1200, 0);
    return p;
  }
  // The backend a request with `payload` from client port `port` went to, or "" if not forwarded.
  std::string backend_of(std::vector<std::uint8_t> payload, std::uint16_t port,
                         FlowAffinity flows = {}) {
    auto spec = request(port);
    spec.payload = std::move(payload);
    auto frame = build_frame(spec).bytes;
    FrameOutcome o =
        process_frame({frame.data(), frame.size()}, *snapshot_, 0, {queue_, counters_}, flows);
    if (o != FrameOutcome::to(1)) return "";
    packet::ParsedPacket p;
    EXPECT_EQ(packet::parse_frame({frame.data(), frame.size()}, p), packet::ParseError::none);
    return net::Endpoint{p.destination_ip(), p.dst_port}.to_string();
  }
  std::uint64_t fallback(QuicLbOutcome why) {
    return counters_.quic_lb_fallback[static_cast<std::size_t>(why)].value();
  }

  config::Config config_;
  std::unique_ptr<Snapshot> snapshot_;
  ResolutionQueue queue_;
  WorkerCounters counters_;
};

TEST_P(QuicChoiceTest, AConnectionIdGoesToItsServerWhateverTheClientPort) {
  use(quic_config());
  for (std::size_t b = 0; b < kBackends.size(); ++b) {
    for (std::uint16_t port = 40000; port < 40064; ++port) {
      ASSERT_EQ(backend_of(short_header(b, static_cast<std::uint8_t>(port)), port), kBackends[b])
          << "client port " << port;
    }
  }
  EXPECT_EQ(counters_.quic_lb_routed[1].value(), 3u * 64);
  EXPECT_EQ(counters_.quic_lb_routed[0].value(), 0u);
}

TEST_P(QuicChoiceTest, WithoutQuicLbTheFourTupleDecidesAndConnectionsMove) {
  config::Config c = quic_config();
  use(c);
  const std::vector<std::uint8_t> packet = short_header(0);  // as backend 0's server issued it
  c.services[0].quic_lb.reset();
  c.services[0].backend_server_ids.clear();
  use(c);
  std::set<std::string> seen;
  for (std::uint16_t port = 40000; port < 40064; ++port) seen.insert(backend_of(packet, port));
  EXPECT_EQ(seen.size(), 3u) << "one connection ID, 64 client ports: Maglev spreads them";
  EXPECT_EQ(counters_.quic_lb_routed[1].value(), 0u);
}

TEST_P(QuicChoiceTest, AClientsInitialFallsBackToTheFourTupleAndFollowsItsFlow) {
  use(quic_config());
  FlowTable flows(4096, 30000, counters_.flows);
  FlowAffinity affinity{&flows, 0};
  std::set<std::string> seen;
  for (std::uint8_t i = 0; i < 64; ++i) {
    std::uint16_t port = 41000 + i;
    std::string first = backend_of(client_initial(i), port, affinity);
    ASSERT_FALSE(first.empty());
    EXPECT_EQ(backend_of(client_initial(i), port, affinity), first) << "the flow keeps it";
    seen.insert(first);
  }
  EXPECT_EQ(seen.size(), 3u);
  std::uint64_t fell_back = 0;
  for (std::size_t r = 1; r < quic::kQuicLbOutcomeCount; ++r) {
    fell_back += counters_.quic_lb_fallback[r].value();
  }
  EXPECT_EQ(fell_back, 128u);
  EXPECT_EQ(fallback(QuicLbOutcome::backend_unusable), 0u);
}

TEST_P(QuicChoiceTest, ABackendDownOrDisabledLosesItsIdsToTheFourTupleADrainedOneKeepsThem) {
  config::Config c = quic_config();
  packet::ServiceTableOptions down;
  down.backend_up = [](const config::ServiceConfig&, const net::Endpoint& b) {
    return b.to_string() != "10.2.0.3:53";
  };
  use(c, down);
  for (std::uint16_t port = 40000; port < 40032; ++port) {
    std::string to = backend_of(short_header(1), port);
    ASSERT_FALSE(to.empty());
    EXPECT_NE(to, kBackends[1]);
  }
  EXPECT_EQ(fallback(QuicLbOutcome::backend_unusable), 32u);

  c.services[0].backend_weights = {1, 0, 1};  // drained: no new flows, its connections stay
  use(c);
  for (std::uint16_t port = 40000; port < 40032; ++port) {
    EXPECT_EQ(backend_of(short_header(1), port), kBackends[1]);
  }
}

TEST_P(QuicChoiceTest, DatagramsThatAreNotQuicKeepTodaysPath) {
  use(quic_config());
  EXPECT_EQ(backend_of({}, 40000).empty(), false);
  EXPECT_EQ(fallback(QuicLbOutcome::not_quic), 1u);
  std::vector<std::uint8_t> unroutable = short_header(0);
  unroutable[1] = 0xe0 | (unroutable[1] & 0x1f);  // codepoint 0b111
  EXPECT_FALSE(backend_of(unroutable, 40001).empty());
  EXPECT_EQ(fallback(QuicLbOutcome::unroutable_codepoint), 1u);
  std::vector<std::uint8_t> other = short_header(0);
  other[1] = 0x00 | (other[1] & 0x1f);  // codepoint 0: no configuration
  EXPECT_FALSE(backend_of(other, 40002).empty());
  EXPECT_EQ(fallback(QuicLbOutcome::unknown_config), 1u);
  std::vector<std::uint8_t> cut = short_header(0);
  cut.resize(1 + GetParam().server_id_bytes);  // fewer DCID octets than the configuration's
  EXPECT_FALSE(backend_of(cut, 40003).empty());
  EXPECT_EQ(fallback(QuicLbOutcome::cid_too_short), 1u);
}

INSTANTIATE_TEST_SUITE_P(Forms, QuicChoiceTest,
                         ::testing::Values(Form{"Plaintext", 2, 6, false},
                                           Form{"SinglePass", 3, 13, true},
                                           Form{"FourPass", 2, 6, true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ferry::fastpath
