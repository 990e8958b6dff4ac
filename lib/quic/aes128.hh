// AES-128 block encryption and decryption for QUIC-LB connection IDs: the key schedule is computed
// once (at config load); a block is then encrypted with AES-NI where the CPU has it, else in C.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "lib/common/env.hh"

namespace ferry::quic {

inline constexpr std::size_t kAesKeyBytes = 16;
inline constexpr std::size_t kAesBlockBytes = 16;
inline constexpr std::size_t kAesRounds = 10;

using AesKey = std::array<std::uint8_t, kAesKeyBytes>;

// Which code runs the rounds. Both give the same bytes; the portable engine is the fallback for
// CPUs without AES-NI (and is not constant-time: its S-box lookups depend on the data).
enum class AesEngine : std::uint8_t { aesni, portable };
std::string_view to_string(AesEngine engine);

// True when this CPU executes the AES-NI instructions (cpuid, via __builtin_cpu_supports).
bool cpu_has_aesni();

// The engine to use: FERRY_QUIC_AESNI=0|off forces the portable one (as on a CPU without AES-NI),
// 1|on requires AES-NI (std::runtime_error if the CPU lacks it), auto or unset takes AES-NI when
// the CPU has it. `lookup` is getenv by default (tests pass their own).
AesEngine choose_aes_engine(EnvLookup lookup = nullptr);

class Aes128 {
 public:
  // Expands `key`. Throws std::invalid_argument when `engine` is aesni on a CPU without it.
  Aes128(const AesKey& key, AesEngine engine);

  // One block, in and out may alias. No allocation, no branch on the data beyond the engine.
  void encrypt(const std::uint8_t* in, std::uint8_t* out) const noexcept;
  void decrypt(const std::uint8_t* in, std::uint8_t* out) const noexcept;
  AesEngine engine() const { return engine_; }

  // Round keys as FIPS-197 lays them out (w[4r..4r+3] as 16 bytes), for the engines.
  using RoundKeys = std::array<std::array<std::uint8_t, kAesBlockBytes>, kAesRounds + 1>;

 private:
  alignas(16) RoundKeys encrypt_keys_{};
  // The equivalent inverse cipher's keys: reverse order, InvMixColumns applied to rounds 1..9.
  alignas(16) RoundKeys decrypt_keys_{};
  AesEngine engine_;
};

}  // namespace ferry::quic
