// The portable AES-128 engine and the key schedule both engines share, from FIPS-197: the S-boxes
// and the round tables (SubBytes and MixColumns of one byte as one 32-bit word, the classic
// "T-table" form) are derived at compile time from GF(2^8); a round is 16 lookups and XORs.
// Table lookups depend on the data, so this engine is not constant-time; it is the fallback for
// CPUs without AES-NI.
#include <array>
#include <cstdint>
#include <cstring>

#include "lib/quic/aes_engines.hh"

namespace ferry::quic::aes_detail {
namespace {

using ByteTable = std::array<std::uint8_t, 256>;
using WordTable = std::array<std::uint32_t, 256>;

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
constexpr ByteTable make_sbox() {
  ByteTable power{}, log{};
  std::uint8_t p = 1;
  for (int i = 0; i < 255; ++i) {
    power[i] = p;
    log[p] = static_cast<std::uint8_t>(i);
    p = gf_mul(p, 0x03);
  }
  ByteTable box{};
  for (int x = 0; x < 256; ++x) {
    std::uint8_t b = x == 0 ? 0 : power[(255 - log[x]) % 255];
    box[x] =
        static_cast<std::uint8_t>(b ^ rotl8(b, 1) ^ rotl8(b, 2) ^ rotl8(b, 3) ^ rotl8(b, 4) ^ 0x63);
  }
  return box;
}

constexpr ByteTable make_inverse(const ByteTable& box) {
  ByteTable inv{};
  for (int x = 0; x < 256; ++x) inv[box[x]] = static_cast<std::uint8_t>(x);
  return inv;
}

constexpr ByteTable kSbox = make_sbox();
constexpr ByteTable kInverseSbox = make_inverse(kSbox);
static_assert(kSbox[0x00] == 0x63 && kSbox[0x53] == 0xed, "FIPS-197 S-box spot values");

// A column word holds row r in bits 8r..8r+7. T[x] is box[x] times the MixColumns coefficients
// of the row it comes from, spread over the four rows it feeds; the tables of rows 1..3 are
// rotations of row 0's.
constexpr std::uint32_t column(std::uint8_t r0, std::uint8_t r1, std::uint8_t r2, std::uint8_t r3) {
  return std::uint32_t{r0} | std::uint32_t{r1} << 8 | std::uint32_t{r2} << 16 |
         std::uint32_t{r3} << 24;
}

constexpr WordTable make_round_table(const ByteTable& box, std::array<std::uint8_t, 4> m) {
  WordTable t{};
  for (int x = 0; x < 256; ++x) {
    const std::uint8_t s = box[x];
    t[x] = column(gf_mul(s, m[0]), gf_mul(s, m[1]), gf_mul(s, m[2]), gf_mul(s, m[3]));
  }
  return t;
}

constexpr std::uint32_t rotl32(std::uint32_t v, int bits) {
  return v << bits | v >> (32 - bits);
}

// Encryption: MixColumns' column {02 01 01 03}; decryption: InvMixColumns' {0e 09 0d 0b}.
constexpr WordTable kEncrypt0 = make_round_table(kSbox, {0x02, 0x01, 0x01, 0x03});
constexpr WordTable kDecrypt0 = make_round_table(kInverseSbox, {0x0e, 0x09, 0x0d, 0x0b});
// InvMixColumns alone (no S-box), for the decryption round keys.
constexpr ByteTable make_identity() {
  ByteTable t{};
  for (int x = 0; x < 256; ++x) t[x] = static_cast<std::uint8_t>(x);
  return t;
}
constexpr WordTable kInverseMix0 = make_round_table(make_identity(), {0x0e, 0x09, 0x0d, 0x0b});

std::uint32_t load_column(const std::uint8_t* p) {
  return column(p[0], p[1], p[2], p[3]);
}
void store_column(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v >> 16);
  p[3] = static_cast<std::uint8_t>(v >> 24);
}

std::uint8_t row(std::uint32_t word, int r) {
  return static_cast<std::uint8_t>(word >> (8 * r));
}

// One full round: for output column c, row r comes from input column c + r (ShiftRows) or
// c - r (InvShiftRows), through the row's table.
void full_round(const WordTable& t0, int direction, const std::uint32_t in[4],
                const std::uint8_t* key, std::uint32_t out[4]) {
  for (int c = 0; c < 4; ++c) {
    std::uint32_t v = t0[row(in[c], 0)];
    v ^= rotl32(t0[row(in[(c + direction * 1 + 4) % 4], 1)], 8);
    v ^= rotl32(t0[row(in[(c + direction * 2 + 4) % 4], 2)], 16);
    v ^= rotl32(t0[row(in[(c + direction * 3 + 4) % 4], 3)], 24);
    out[c] = v ^ load_column(key + 4 * c);
  }
}

// The last round: S-box and row shift only.
void last_round(const ByteTable& box, int direction, const std::uint32_t in[4],
                const std::uint8_t* key, std::uint8_t* out) {
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < 4; ++r) {
      out[4 * c + r] = box[row(in[(c + direction * r + 4) % 4], r)] ^ key[4 * c + r];
    }
  }
}

void run(const Aes128::RoundKeys& keys, const WordTable& t0, const ByteTable& box, int direction,
         const std::uint8_t* in, std::uint8_t* out) {
  std::uint32_t state[4], next[4];
  for (int c = 0; c < 4; ++c) {
    state[c] = load_column(in + 4 * c) ^ load_column(keys[0].data() + 4 * c);
  }
  for (std::size_t round = 1; round < kAesRounds; ++round) {
    full_round(t0, direction, state, keys[round].data(), next);
    std::memcpy(state, next, sizeof state);
  }
  last_round(box, direction, state, keys[kAesRounds].data(), out);
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

// The equivalent inverse cipher's keys (FIPS-197 5.3.5), which AESDEC also expects: reverse
// order, InvMixColumns applied to all but the first and the last.
void expand_decrypt_keys(const Aes128::RoundKeys& encrypt_keys, Aes128::RoundKeys& out) {
  out[0] = encrypt_keys[kAesRounds];
  out[kAesRounds] = encrypt_keys[0];
  for (std::size_t i = 1; i < kAesRounds; ++i) {
    const std::uint8_t* k = encrypt_keys[kAesRounds - i].data();
    for (int c = 0; c < 4; ++c) {
      std::uint32_t v = kInverseMix0[k[4 * c]] ^ rotl32(kInverseMix0[k[4 * c + 1]], 8) ^
                        rotl32(kInverseMix0[k[4 * c + 2]], 16) ^
                        rotl32(kInverseMix0[k[4 * c + 3]], 24);
      store_column(out[i].data() + 4 * c, v);
    }
  }
}

void portable_encrypt(const Aes128::RoundKeys& keys, const std::uint8_t* in, std::uint8_t* out) {
  run(keys, kEncrypt0, kSbox, +1, in, out);
}

void portable_decrypt(const Aes128::RoundKeys& decrypt_keys, const std::uint8_t* in,
                      std::uint8_t* out) {
  run(decrypt_keys, kDecrypt0, kInverseSbox, -1, in, out);
}

}  // namespace ferry::quic::aes_detail
