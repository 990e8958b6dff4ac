// The four-pass Feistel network, step by step as the draft writes it. For an odd length the middle
// octet is shared: its high nibble belongs to the left half, its low nibble to the right half,
// and every pass clears the other nibble of the half it produced.
#include "lib/quic/four_pass.hh"

#include <cstring>

#include "lib/quic/lb_config.hh"

namespace ferry::quic {
namespace {

// Halves of at most ceil(19 / 2) = 10 octets.
struct Halves {
  std::uint8_t left[kAesBlockBytes];
  std::uint8_t right[kAesBlockBytes];
  std::size_t half_bytes;  // plaintext_len / 2, rounded up
  bool odd;
};

Halves split(const std::uint8_t* in, std::size_t length) {
  Halves h;
  h.half_bytes = (length + 1) / 2;
  h.odd = (length % 2) != 0;
  std::memcpy(h.left, in, h.half_bytes);
  std::memcpy(h.right, in + length - h.half_bytes, h.half_bytes);
  if (h.odd) {
    h.left[h.half_bytes - 1] &= 0xf0;
    h.right[0] &= 0x0f;
  }
  return h;
}

void join(const Halves& h, std::uint8_t* out) {
  std::memcpy(out, h.left, h.half_bytes);
  if (h.odd) {
    out[h.half_bytes - 1] |= h.right[0];
    std::memcpy(out + h.half_bytes, h.right + 1, h.half_bytes - 1);
  } else {
    std::memcpy(out + h.half_bytes, h.right, h.half_bytes);
  }
}

// target ^= truncate(AES_ECB(key, expand(length, pass, source)), half_len), where expand puts
// the half first, zero pads, and ends with the length octet and the pass octet.
void pass_into(const Aes128& aes, const Halves& h, std::size_t length, std::uint8_t pass,
               const std::uint8_t* source, std::uint8_t* target) {
  alignas(16) std::uint8_t block[kAesBlockBytes] = {};
  std::memcpy(block, source, h.half_bytes);
  block[14] = static_cast<std::uint8_t>(length);
  block[15] = pass;
  aes.encrypt(block, block);
  for (std::size_t i = 0; i < h.half_bytes; ++i) target[i] ^= block[i];
}

void clear_left_tail(Halves& h) {
  if (h.odd) h.left[h.half_bytes - 1] &= 0xf0;
}
void clear_right_head(Halves& h) {
  if (h.odd) h.right[0] &= 0x0f;
}

}  // namespace

void four_pass_encrypt(const Aes128& aes, const std::uint8_t* in, std::size_t length,
                       std::uint8_t* out) noexcept {
  Halves h = split(in, length);
  pass_into(aes, h, length, 1, h.left, h.right);  // right_1
  clear_right_head(h);
  pass_into(aes, h, length, 2, h.right, h.left);  // left_1
  clear_left_tail(h);
  pass_into(aes, h, length, 3, h.left, h.right);  // right_2
  clear_right_head(h);
  pass_into(aes, h, length, 4, h.right, h.left);  // left_2
  clear_left_tail(h);
  join(h, out);
}

// The draft's decryption pseudocode clears left_1 after computing right_1; the clear that keeps
// the passes inverse to encryption is of right_1 (as its step 5 does), which is what this does.
void four_pass_decrypt(const Aes128& aes, const std::uint8_t* in, std::size_t length,
                       std::uint8_t* out, std::size_t wanted) noexcept {
  Halves h = split(in, length);                   // left_2, right_2
  pass_into(aes, h, length, 4, h.right, h.left);  // left_1
  clear_left_tail(h);
  pass_into(aes, h, length, 3, h.left, h.right);  // right_1
  clear_right_head(h);
  pass_into(aes, h, length, 2, h.right, h.left);  // left_0
  clear_left_tail(h);
  if (wanted <= length / 2) {
    // The server ID lies wholly in left_0's whole octets: the nonce is not needed.
    std::memcpy(out, h.left, wanted);
    return;
  }
  pass_into(aes, h, length, 1, h.left, h.right);  // right_0
  clear_right_head(h);
  std::uint8_t plain[kMaxCidBytes];
  join(h, plain);
  std::memcpy(out, plain, wanted);
}

}  // namespace ferry::quic
