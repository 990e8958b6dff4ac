// The portable AES-128 engine and the key expansion both engines share, straight from FIPS-197:
// byte-wise rounds over a column-major state, S-boxes derived at compile time from GF(2^8).
#include <array>
#include <cstdint>
#include <cstring>

#include "lib/quic/aes128.hh"

namespace ferry::quic::aes_detail {
namespace {

using Table = std::array<std::uint8_t, 256>;

// Multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1.
constexpr std::uint8_t gf_mul(std::uint8_t a, std::uint8_t b) {
  std::uint8_t product = 0;
  while (b != 0) {
    if (b & 1) product ^= a;
    a = static_cast<std::uint8_t>((a << 1) ^ ((a & 0x80) ? 0x1b : 0));
    b >>= 1;
  }
  return product;
}

constexpr std::uint8_t rotl8(std::uint8_t v, int n) {
  return static_cast<std::uint8_t>((v << n) | (v >> (8 - n)));
}

// SubBytes: the multiplicative inverse (0 maps to 0), then the affine map with constant 0x63.
// Inverses come from powers of the generator 0x03: inverse(3^i) = 3^(255-i).
constexpr Table make_sbox() {
  Table power{}, log{};
  std::uint8_t p = 1;
  for (int i = 0; i < 255; ++i) {
    power[i] = p;
    log[p] = static_cast<std::uint8_t>(i);
    p = gf_mul(p, 0x03);
  }
  Table inverse{};
  for (int a = 1; a < 256; ++a) inverse[a] = power[(255 - log[a]) % 255];
  Table box{};
  for (int x = 0; x < 256; ++x) {
    std::uint8_t b = inverse[x];
    box[x] =
        static_cast<std::uint8_t>(b ^ rotl8(b, 1) ^ rotl8(b, 2) ^ rotl8(b, 3) ^ rotl8(b, 4) ^ 0x63);
  }
  return box;
}

constexpr Table make_inverse(const Table& box) {
  Table inv{};
  for (int x = 0; x < 256; ++x) inv[box[x]] = static_cast<std::uint8_t>(x);
  return inv;
}

constexpr Table kSbox = make_sbox();
constexpr Table kInverseSbox = make_inverse(kSbox);
static_assert(kSbox[0x00] == 0x63 && kSbox[0x53] == 0xed, "FIPS-197 S-box spot values");

using State = std::array<std::uint8_t, 16>;  // state[row + 4 * column]

void add_round_key(State& s, const std::array<std::uint8_t, 16>& key) {
  for (int i = 0; i < 16; ++i) s[i] ^= key[i];
}

void sub_bytes(State& s, const Table& box) {
  for (auto& b : s) b = box[b];
}

// Row r moves r columns left (right for the inverse).
void shift_rows(State& s, bool inverse) {
  State t = s;
  for (int r = 1; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      int moved = (c + r) % 4;
      if (inverse) {
        s[r + 4 * moved] = t[r + 4 * c];
      } else {
        s[r + 4 * c] = t[r + 4 * moved];
      }
    }
  }
}

// Each column times {02 03 01 01} (encrypt) or {0e 0b 0d 09} (decrypt), rotated per row.
void mix_columns(State& s, bool inverse) {
  const std::uint8_t m0 = inverse ? 0x0e : 0x02, m1 = inverse ? 0x0b : 0x03;
  const std::uint8_t m2 = inverse ? 0x0d : 0x01, m3 = inverse ? 0x09 : 0x01;
  for (int c = 0; c < 4; ++c) {
    std::uint8_t* col = &s[4 * c];
    const std::uint8_t a0 = col[0], a1 = col[1], a2 = col[2], a3 = col[3];
    col[0] = gf_mul(a0, m0) ^ gf_mul(a1, m1) ^ gf_mul(a2, m2) ^ gf_mul(a3, m3);
    col[1] = gf_mul(a0, m3) ^ gf_mul(a1, m0) ^ gf_mul(a2, m1) ^ gf_mul(a3, m2);
    col[2] = gf_mul(a0, m2) ^ gf_mul(a1, m3) ^ gf_mul(a2, m0) ^ gf_mul(a3, m1);
    col[3] = gf_mul(a0, m1) ^ gf_mul(a1, m2) ^ gf_mul(a2, m3) ^ gf_mul(a3, m0);
  }
}

}  // namespace

void expand_key(const AesKey& key, Aes128::RoundKeys& out) {
  std::uint8_t words[4 * (kAesRounds + 1)][4];
  std::memcpy(words, key.data(), key.size());
  std::uint8_t rcon = 0x01;
  for (std::size_t i = 4; i < 4 * (kAesRounds + 1); ++i) {
    std::uint8_t t[4];
    std::memcpy(t, words[i - 1], 4);
    if (i % 4 == 0) {
      // RotWord, SubWord, then the round constant into the first byte.
      const std::uint8_t first = t[0];
      t[0] = static_cast<std::uint8_t>(kSbox[t[1]] ^ rcon);
      t[1] = kSbox[t[2]];
      t[2] = kSbox[t[3]];
      t[3] = kSbox[first];
      rcon = gf_mul(rcon, 0x02);
    }
    for (int b = 0; b < 4; ++b) words[i][b] = words[i - 4][b] ^ t[b];
  }
  for (std::size_t round = 0; round <= kAesRounds; ++round) {
    std::memcpy(out[round].data(), words[4 * round], 16);
  }
}

void portable_encrypt(const Aes128::RoundKeys& keys, const std::uint8_t* in, std::uint8_t* out) {
  State s;
  std::memcpy(s.data(), in, 16);
  add_round_key(s, keys[0]);
  for (std::size_t round = 1; round < kAesRounds; ++round) {
    sub_bytes(s, kSbox);
    shift_rows(s, false);
    mix_columns(s, false);
    add_round_key(s, keys[round]);
  }
  sub_bytes(s, kSbox);
  shift_rows(s, false);
  add_round_key(s, keys[kAesRounds]);
  std::memcpy(out, s.data(), 16);
}

void portable_decrypt(const Aes128::RoundKeys& keys, const std::uint8_t* in, std::uint8_t* out) {
  State s;
  std::memcpy(s.data(), in, 16);
  add_round_key(s, keys[kAesRounds]);
  for (std::size_t round = kAesRounds - 1; round >= 1; --round) {
    shift_rows(s, true);
    sub_bytes(s, kInverseSbox);
    add_round_key(s, keys[round]);
    mix_columns(s, true);
  }
  shift_rows(s, true);
  sub_bytes(s, kInverseSbox);
  add_round_key(s, keys[0]);
  std::memcpy(out, s.data(), 16);
}

}  // namespace ferry::quic::aes_detail
