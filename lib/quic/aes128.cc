// Aes128: engine choice (CPU probe and the FERRY_QUIC_AESNI switch) and per-block dispatch.
#include "lib/quic/aes128.hh"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

#include "lib/quic/aes_engines.hh"

namespace ferry::quic {

std::string_view to_string(AesEngine engine) {
  return engine == AesEngine::aesni ? "aesni" : "portable";
}

bool cpu_has_aesni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse2");
#else
  return false;
#endif
}

AesEngine choose_aes_engine(EnvLookup lookup) {
  lookup = env_or_process(lookup);
  const bool present = cpu_has_aesni();
  const char* text = lookup("FERRY_QUIC_AESNI");
  std::string_view v = text ? text : "";
  if (v == "0" || v == "off" || v == "false") return AesEngine::portable;
  if (v == "1" || v == "on" || v == "true") {
    if (!present) {
      throw std::runtime_error(
          "FERRY_QUIC_AESNI=1 forces AES-NI, but this CPU lacks it; unset it or set it to auto to "
          "use the portable AES");
    }
    return AesEngine::aesni;
  }
  if (!v.empty() && v != "auto") {
    throw std::runtime_error(fmt::format("FERRY_QUIC_AESNI={}: expected 0, 1 or auto", v));
  }
  return present ? AesEngine::aesni : AesEngine::portable;
}

Aes128::Aes128(const AesKey& key, AesEngine engine) : engine_(engine) {
  if (engine == AesEngine::aesni && !cpu_has_aesni()) {
    throw std::invalid_argument("AES-NI requested on a CPU without it");
  }
  aes_detail::expand_key(key, encrypt_keys_);
  aes_detail::expand_decrypt_keys(encrypt_keys_, decrypt_keys_);
}

void Aes128::encrypt(const std::uint8_t* in, std::uint8_t* out) const noexcept {
  if (engine_ == AesEngine::aesni) {
    aes_detail::aesni_encrypt(encrypt_keys_, in, out);
  } else {
    aes_detail::portable_encrypt(encrypt_keys_, in, out);
  }
}

void Aes128::decrypt(const std::uint8_t* in, std::uint8_t* out) const noexcept {
  if (engine_ == AesEngine::aesni) {
    aes_detail::aesni_decrypt(decrypt_keys_, in, out);
  } else {
    aes_detail::portable_decrypt(decrypt_keys_, in, out);
  }
}

}  // namespace ferry::quic
