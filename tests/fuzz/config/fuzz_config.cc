// libFuzzer target for lib/config: any bytes either validate to a Config or are refused with a
// ConfigError pointing inside the text; an accepted Config survives to_json and back unchanged
// (once its QUIC-LB keys, which to_json writes as "(set)", are put back).
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/config/config.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry::config;

constexpr const char* kName = "fuzz.json";

// 1-based line count of `text`, as an editor shows it (a final newline opens one more line).
int line_count(const std::string& text) {
  int lines = 1;
  for (char c : text) lines += c == '\n';
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Config config;
  try {
    config = parse_config(text, kName);
  } catch (const ConfigError& e) {
    // In-memory text has no file-level errors: every refusal names a place in the text.
    FUZZ_CHECK(e.file() == kName);
    FUZZ_CHECK(!e.message().empty());
    FUZZ_CHECK(e.line() >= 1 && e.line() <= line_count(text));
    FUZZ_CHECK(e.column() >= 1 && static_cast<std::size_t>(e.column()) <= size + 1);
    return 0;
  }
  FUZZ_CHECK(config.source_path == kName);

  // The effective config is itself a valid config file and means the same (to_json.cc promises
  // it: `ferryctl config` output can be saved and loaded again), except that a QUIC-LB key is
  // never written: "(set)" stands in its place, and the operator writes the key back.
  nlohmann::json json = to_json(config);
  for (std::size_t i = 0; i < config.services.size(); ++i) {
    if (!config.services[i].quic_lb) continue;
    const auto& entries = config.services[i].quic_lb->configs;
    for (std::size_t k = 0; k < entries.size(); ++k) {
      nlohmann::json& key = json["services"][i]["quic_lb"]["configs"][k]["key"];
      if (!entries[k].key) {
        FUZZ_CHECK(key.is_null());
        continue;
      }
      FUZZ_CHECK(key == "(set)");
      std::string hex;
      for (auto b : *entries[k].key) hex += fmt::format("{:02x}", b);
      key = hex;
    }
  }
  const std::string effective = json.dump(2);
  Config again;
  try {
    again = parse_config(effective, kName);
  } catch (const ConfigError&) {
    FUZZ_CHECK(false);
  }
  FUZZ_CHECK(again == config);
  FUZZ_CHECK(to_json(again) == to_json(config));
  return 0;
}
