// What QUIC-LB costs per packet in the worker: QuicLbService::route() on a 1-RTT (short header)
// datagram for each algorithm (plaintext, single-pass, four-pass with 3 and with 4 passes) and
// AES engine, next to the header parse alone. One thread, no I/O; run tests/bench/quic/run.sh.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "lib/quic/quic_lb_service.hh"

namespace ferry::quic {
namespace {

constexpr AesKey kKey = {0x8f, 0x95, 0xf0, 0x92, 0x45, 0x76, 0x5f, 0x80,
                         0x25, 0x69, 0x34, 0xe5, 0x0c, 0x66, 0x20, 0x7f};

enum Form { kPlaintext = 0, kSinglePass = 1, kFourPass3 = 2, kFourPass4 = 3 };

LbConfig config_of(Form form) {
  LbConfig c;
  c.config_id = 1;
  switch (form) {
    case kPlaintext:
      c.server_id_bytes = 2, c.nonce_bytes = 6;
      break;
    case kSinglePass:
      c.server_id_bytes = 2, c.nonce_bytes = 14, c.key = kKey;
      break;
    case kFourPass3:  // server ID in the left half: three passes
      c.server_id_bytes = 2, c.nonce_bytes = 6, c.key = kKey;
      break;
    case kFourPass4:  // server ID past the left half: four passes
      c.server_id_bytes = 10, c.nonce_bytes = 5, c.key = kKey;
      break;
  }
  return c;
}

const char* form_name(Form form) {
  static const char* const names[] = {"plaintext", "single_pass", "four_pass 3 passes",
                                      "four_pass 4 passes"};
  return names[form];
}

void BM_Route(benchmark::State& state) {
  const auto form = static_cast<Form>(state.range(0));
  const auto engine = state.range(1) ? AesEngine::aesni : AesEngine::portable;
  if (engine == AesEngine::aesni && !cpu_has_aesni()) {
    state.SkipWithError("no AES-NI");
    return;
  }
  LbConfig config = config_of(form);
  // 64 backends; the packets name one of them.
  std::vector<ServerIdEntry> servers;
  for (std::uint32_t i = 0; i < 64; ++i) {
    std::uint8_t id[15] = {};
    id[config.server_id_bytes - 1] = static_cast<std::uint8_t>(i + 1);
    servers.push_back(ServerIdEntry::make({id, config.server_id_bytes}, i));
  }
  QuicLbService service({&config, 1}, servers, engine);
  std::vector<std::uint8_t> packet(1200, 0x5a);
  packet[0] = 0x41;
  std::uint8_t nonce[18] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  service.codec(1)->encode({servers[17].bytes.data(), config.server_id_bytes},
                           {nonce, config.nonce_bytes}, 0, {packet.data() + 1, 20});
  for (auto _ : state) {
    QuicLbRoute r = service.route(packet);
    benchmark::DoNotOptimize(r);
  }
  if (!service.route(packet).routed()) state.SkipWithError("not routed");
  state.SetLabel(std::string(form_name(form)) + " " + std::string(to_string(engine)));
}
BENCHMARK(BM_Route)->ArgsProduct({{kPlaintext, kSinglePass, kFourPass3, kFourPass4}, {0, 1}});

void BM_ParseHeader(benchmark::State& state) {
  std::vector<std::uint8_t> packet(1200, 0x5a);
  packet[0] = 0x41;
  for (auto _ : state) {
    QuicHeader h = parse_quic_header(packet);
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(BM_ParseHeader);

}  // namespace
}  // namespace ferry::quic

BENCHMARK_MAIN();
