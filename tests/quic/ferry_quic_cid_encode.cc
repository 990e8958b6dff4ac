// ferry_quic_cid_encode CONFIG NONCE_HEX: the connection ID a server with CONFIG
// (ferry_quic_server's
// --quic-lb text: codepoint, its server ID, nonce length, key) issues with that nonce, encoded with
// ferry's CidCodec, in hex on stdout. The lab bench builds its QUIC packets with it. 64 on bad
// arguments (a nonce not of the config's length included).
#include <cstdio>
#include <exception>
#include <vector>

#include "lib/quic/cid_codec.hh"
#include "tests/quic/hex.hh"
#include "tests/quic/quic_lb_option.hh"

int main(int argc, char** argv) {
  using namespace ferry;
  if (argc != 3) {
    std::fputs("usage: ferry_quic_cid_encode CONFIG NONCE_HEX\n", stderr);
    return 64;
  }
  try {
    quic_test::QuicLbOption option = quic_test::parse_quic_lb_option(argv[1]);
    auto nonce = quic_test::from_hex(argv[2]);
    if (!nonce) {
      std::fprintf(stderr, "ferry_quic_cid_encode: %s is not hex\n", argv[2]);
      return 64;
    }
    quic::CidCodec codec(option.config, quic::choose_aes_engine());
    std::vector<std::uint8_t> cid(codec.cid_bytes());
    codec.encode(option.server_id, *nonce, codec.self_encoded_length(), cid);
    std::printf("%s\n", quic_test::to_hex(cid).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry_quic_cid_encode: %s\n", e.what());
    return 64;
  }
}
