// ferry_quic_cid_decode CONFIG CID_HEX: the server ID in a connection ID, decoded with ferry's
// CidCodec, in hex on stdout. CONFIG is ferry_quic_server's --quic-lb text (its server_id gives
// the length). Exit 1 when the CID is too short or names another config; 64 on bad arguments.
#include <cstdio>
#include <exception>
#include <vector>

#include "lib/quic/cid_codec.hh"
#include "tests/quic/hex.hh"
#include "tests/quic/quic_lb_option.hh"

int main(int argc, char** argv) {
  using namespace ferry;
  if (argc != 3) {
    std::fputs("usage: ferry_quic_cid_decode CONFIG CID_HEX\n", stderr);
    return 64;
  }
  try {
    quic_test::QuicLbOption option = quic_test::parse_quic_lb_option(argv[1]);
    auto cid = quic_test::from_hex(argv[2]);
    if (!cid) {
      std::fprintf(stderr, "ferry_quic_cid_decode: %s is not hex\n", argv[2]);
      return 64;
    }
    quic::CidCodec codec(option.config, quic::choose_aes_engine());
    if (cid->size() < codec.cid_bytes()) {
      std::fprintf(stderr, "ferry_quic_cid_decode: %zu octets, the config needs %zu\n", cid->size(),
                   codec.cid_bytes());
      return 1;
    }
    if (quic::config_id_of((*cid)[0]) != option.config.config_id) {
      std::fprintf(stderr, "ferry_quic_cid_decode: the CID names config %u, not %u\n",
                   quic::config_id_of((*cid)[0]), option.config.config_id);
      return 1;
    }
    std::vector<std::uint8_t> server_id(codec.server_id_bytes());
    codec.decode(cid->data(), server_id.data());
    std::printf("%s\n", quic_test::to_hex(server_id).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry_quic_cid_decode: %s\n", e.what());
    return 64;
  }
}
