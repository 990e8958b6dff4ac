// The AES-NI engine: ten AESENC/AESDEC rounds per block over the shared key schedules (AESDEC
// takes the equivalent inverse cipher's keys, as expand_decrypt_keys makes them). Compiled
// for the aes target per function, so the rest of ferry keeps the baseline ISA; Aes128 calls in
// here only after cpu_has_aesni().
#include "lib/quic/aes_engines.hh"

#if defined(__x86_64__) || defined(__i386__)
#include <wmmintrin.h>

#define FERRY_AESNI_TARGET __attribute__((target("aes,sse2")))

namespace ferry::quic::aes_detail {
namespace {

FERRY_AESNI_TARGET inline __m128i load(const std::uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
FERRY_AESNI_TARGET inline void store(std::uint8_t* p, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

}  // namespace

FERRY_AESNI_TARGET void aesni_encrypt(const Aes128::RoundKeys& keys, const std::uint8_t* in,
                                      std::uint8_t* out) {
  __m128i s = _mm_xor_si128(load(in), load(keys[0].data()));
  for (std::size_t round = 1; round < kAesRounds; ++round) {
    s = _mm_aesenc_si128(s, load(keys[round].data()));
  }
  store(out, _mm_aesenclast_si128(s, load(keys[kAesRounds].data())));
}

FERRY_AESNI_TARGET void aesni_decrypt(const Aes128::RoundKeys& keys, const std::uint8_t* in,
                                      std::uint8_t* out) {
  __m128i s = _mm_xor_si128(load(in), load(keys[0].data()));
  for (std::size_t round = 1; round < kAesRounds; ++round) {
    s = _mm_aesdec_si128(s, load(keys[round].data()));
  }
  store(out, _mm_aesdeclast_si128(s, load(keys[kAesRounds].data())));
}

}  // namespace ferry::quic::aes_detail

#else  // not x86: cpu_has_aesni() is false, so Aes128 never calls these.

#include <cstdlib>

namespace ferry::quic::aes_detail {
void aesni_encrypt(const Aes128::RoundKeys&, const std::uint8_t*, std::uint8_t*) {
  std::abort();
}
void aesni_decrypt(const Aes128::RoundKeys&, const std::uint8_t*, std::uint8_t*) {
  std::abort();
}
}  // namespace ferry::quic::aes_detail

#endif
