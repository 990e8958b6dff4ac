// The AES-NI engine: ten AESENC/AESDEC rounds per block over the shared key schedule. Compiled
// for the aes target per function, so the rest of ferry keeps the baseline ISA; Aes128 calls in
// here only after cpu_has_aesni().
#include "lib/quic/aes128.hh"

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

// The equivalent inverse cipher (FIPS-197 5.3.5): round keys in reverse order, InvMixColumns
// applied to all but the first and last, which is what AESDEC expects.
FERRY_AESNI_TARGET void aesni_decrypt_keys(const Aes128::RoundKeys& encrypt_keys,
                                           Aes128::RoundKeys& out) {
  store(out[0].data(), load(encrypt_keys[kAesRounds].data()));
  for (std::size_t i = 1; i < kAesRounds; ++i) {
    store(out[i].data(), _mm_aesimc_si128(load(encrypt_keys[kAesRounds - i].data())));
  }
  store(out[kAesRounds].data(), load(encrypt_keys[0].data()));
}

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
void aesni_decrypt_keys(const Aes128::RoundKeys&, Aes128::RoundKeys&) {
  std::abort();
}
void aesni_encrypt(const Aes128::RoundKeys&, const std::uint8_t*, std::uint8_t*) {
  std::abort();
}
void aesni_decrypt(const Aes128::RoundKeys&, const std::uint8_t*, std::uint8_t*) {
  std::abort();
}
}  // namespace ferry::quic::aes_detail

#endif
