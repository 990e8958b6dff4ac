// libFuzzer target for lib/quic: any bytes as a UDP payload through the QUIC header parser and a
// QUIC-LB service with every algorithm (checked: the DCID lies inside the payload, a routed packet
// names a real backend, both AES engines agree); and the same bytes as a configuration plus
// connection ID, whose four-pass or single-pass decryption must invert encryption exactly.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "lib/quic/cid_codec.hh"
#include "lib/quic/four_pass.hh"
#include "lib/quic/quic_header.hh"
#include "lib/quic/quic_lb_service.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry::quic;

constexpr AesKey kKey = {0x8f, 0x95, 0xf0, 0x92, 0x45, 0x76, 0x5f, 0x80,
                         0x25, 0x69, 0x34, 0xe5, 0x0c, 0x66, 0x20, 0x7f};
constexpr std::uint32_t kBackends = 6;

LbConfig config(int id, int sid, int nonce, bool keyed) {
  LbConfig c;
  c.config_id = static_cast<std::uint8_t>(id);
  c.server_id_bytes = static_cast<std::uint8_t>(sid);
  c.nonce_bytes = static_cast<std::uint8_t>(nonce);
  if (keyed) c.key = kKey;
  return c;
}

// Codepoints 0..4 in use (5 and 6 unknown): plaintext 2+6, four-pass odd 3+4, single-pass 8+8,
// four-pass with the server ID past the left half 10+5, four-pass even 9+9. The seeds
// (tests/fuzz/corpus/quic_lb) carry CIDs of these with server IDs of the backends below.
QuicLbService make_service(AesEngine engine) {
  std::vector<LbConfig> configs = {config(0, 2, 6, false), config(1, 3, 4, true),
                                   config(2, 8, 8, true), config(3, 10, 5, true),
                                   config(4, 9, 9, true)};
  auto id = [](std::initializer_list<std::uint8_t> bytes, std::uint32_t backend) {
    return ServerIdEntry::make(std::span(bytes.begin(), bytes.size()), backend);
  };
  std::vector<ServerIdEntry> servers = {
      id({0x00, 0x01}, 0),
      id({0x00, 0x02}, 1),
      id({0xed, 0x79, 0x3a}, 2),
      id({0xed, 0x79, 0x3a, 0x51, 0xd4, 0x9b, 0x8f, 0x5f}, 3),
      id({0xed, 0x79, 0x3a, 0x51, 0xd4, 0x9b, 0x8f, 0x5f, 0xab, 0x65}, 4),
      id({0xed, 0x79, 0x3a, 0x51, 0xd4, 0x9b, 0x8f, 0x5f, 0xab}, 5)};
  return QuicLbService(configs, servers, engine);
}

void check_header(std::span<const std::uint8_t> payload) {
  QuicHeader h = parse_quic_header(payload);
  FUZZ_CHECK(h.dcid.size() <= kMaxCidBytes);
  if (!h.dcid.empty()) {
    FUZZ_CHECK(h.dcid.data() >= payload.data());
    FUZZ_CHECK(h.dcid.data() + h.dcid.size() <= payload.data() + payload.size());
  }
  if (h.status != HeaderStatus::ok) FUZZ_CHECK(h.dcid.empty());
}

void check_route(std::span<const std::uint8_t> payload) {
  static const QuicLbService portable = make_service(AesEngine::portable);
  static const std::optional<QuicLbService> aesni =
      cpu_has_aesni() ? std::optional<QuicLbService>(make_service(AesEngine::aesni)) : std::nullopt;
  QuicLbRoute r = portable.route(payload);
  if (r.routed()) {
    FUZZ_CHECK(r.backend < kBackends);
    FUZZ_CHECK(r.config_id < kConfigIdCount);
  } else {
    FUZZ_CHECK(r.backend == QuicLbRoute::kNoBackend);
  }
  if (aesni) {
    QuicLbRoute n = aesni->route(payload);
    FUZZ_CHECK(n.outcome == r.outcome && n.backend == r.backend && n.config_id == r.config_id);
  }
}

// Bytes as [server_id_bytes, nonce_bytes, flags, key(16), ciphertext...]: decrypting a ciphertext
// fully and encrypting the result gives the ciphertext back; the codec's decode agrees.
void check_inverse(std::span<const std::uint8_t> data) {
  if (data.size() < 3 + kAesKeyBytes) return;
  const int sid = 1 + data[0] % kMaxServerIdBytes;
  const int nonce = static_cast<int>(kMinNonceBytes) + data[1] % (kMaxNonceBytes - 3);
  if (sid + nonce > static_cast<int>(kMaxPlaintextBytes)) return;
  const AesEngine engine =
      (data[2] & 1) && cpu_has_aesni() ? AesEngine::aesni : AesEngine::portable;
  AesKey key;
  std::memcpy(key.data(), data.data() + 3, key.size());
  auto rest = data.subspan(3 + kAesKeyBytes);
  const std::size_t length = static_cast<std::size_t>(sid + nonce);
  if (rest.size() < length) return;

  LbConfig c = config(data[2] >> 5 == 7 ? 0 : data[2] >> 5, sid, nonce, true);
  c.key = key;
  CidCodec codec(c, engine);
  Aes128 aes(key, engine);
  std::uint8_t plain[kMaxCidBytes] = {};
  if (length == kSinglePassBytes) {
    aes.decrypt(rest.data(), plain);
  } else {
    four_pass_decrypt(aes, rest.data(), length, plain, length);
  }
  std::uint8_t cid[kMaxCidBytes] = {};
  codec.encode(std::span(plain, static_cast<std::size_t>(sid)),
               std::span(plain + sid, static_cast<std::size_t>(nonce)), 0, cid);
  FUZZ_CHECK(std::memcmp(cid + 1, rest.data(), length) == 0);
  std::uint8_t server_id[kMaxServerIdBytes];
  codec.decode(cid, server_id);
  FUZZ_CHECK(std::memcmp(server_id, plain, static_cast<std::size_t>(sid)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size heap copy, so ASan sees any read past the datagram.
  std::vector<std::uint8_t> payload(data, data + size);
  std::span<const std::uint8_t> bytes(payload.data(), payload.size());
  check_header(bytes);
  check_route(bytes);
  check_inverse(bytes);
  return 0;
}
