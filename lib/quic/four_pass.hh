// The four-pass Feistel form of QUIC-LB (draft-ietf-quic-load-balancers-21 5.4.2 and 5.5.2):
// server ID + nonce of 5..19 octets other than 16, split in halves that AES-ECB rounds mix.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/quic/aes128.hh"

namespace ferry::quic {

// Encrypts the `plaintext_bytes` octets at `in` (server ID then nonce) into `out` (the CID after
// its first octet). in and out may alias.
void four_pass_encrypt(const Aes128& aes, const std::uint8_t* in, std::size_t plaintext_bytes,
                       std::uint8_t* out) noexcept;

// Recovers the first `wanted` octets of the plaintext (the server ID) from the `plaintext_bytes`
// octets of ciphertext at `in`: three passes when they all lie in the left half, four otherwise.
void four_pass_decrypt(const Aes128& aes, const std::uint8_t* in, std::size_t plaintext_bytes,
                       std::uint8_t* out, std::size_t wanted) noexcept;

}  // namespace ferry::quic
