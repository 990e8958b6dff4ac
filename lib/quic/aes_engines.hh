// The two AES-128 engines behind Aes128 (aes_portable.cc, aes_ni.cc) and the key expansion they
// share; for lib/quic's own files only.
#pragma once

#include <cstdint>

#include "lib/quic/aes128.hh"

namespace ferry::quic::aes_detail {

// The encryption round keys, and from them the equivalent inverse cipher's (FIPS-197 5.3.5) that
// both engines decrypt with.
void expand_key(const AesKey& key, Aes128::RoundKeys& out);
void expand_decrypt_keys(const Aes128::RoundKeys& encrypt_keys, Aes128::RoundKeys& out);
void portable_encrypt(const Aes128::RoundKeys& keys, const std::uint8_t* in, std::uint8_t* out);
void portable_decrypt(const Aes128::RoundKeys& decrypt_keys, const std::uint8_t* in,
                      std::uint8_t* out);
// AES-NI instructions: call these only when cpu_has_aesni().
void aesni_encrypt(const Aes128::RoundKeys& keys, const std::uint8_t* in, std::uint8_t* out);
void aesni_decrypt(const Aes128::RoundKeys& decrypt_keys, const std::uint8_t* in,
                   std::uint8_t* out);

}  // namespace ferry::quic::aes_detail
