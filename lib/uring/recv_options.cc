// Which receive-path features to use: auto|on|off per feature (config, then FERRY_URING_* in the
// environment for tests), resolved against the kernel probe into the modes actually run.
#include "lib/uring/recv_options.hh"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace ferry::uring {
namespace {

void apply(Tristate& value, const char* name, EnvLookup lookup) {
  const char* text = lookup(name);
  if (text == nullptr) return;
  std::string_view v(text);
  if (v == "0" || v == "off" || v == "false") {
    value = Tristate::off;
  } else if (v == "1" || v == "on" || v == "true") {
    value = Tristate::on;
  } else if (v == "auto" || v.empty()) {
    // keep the configured value
  } else {
    throw std::runtime_error(fmt::format("{}={}: expected 0, 1 or auto", name, v));
  }
}

bool decide(Tristate wanted, bool present, const char* what, const char* key) {
  switch (wanted) {
    case Tristate::off:
      return false;
    case Tristate::automatic:
      return present;
    case Tristate::on:
      if (!present) {
        throw std::runtime_error(fmt::format(
            "{} forced on, but this kernel lacks io_uring {}; set {} to \"auto\" to fall back", key,
            what, key));
      }
      return true;
  }
  return false;
}

}  // namespace

RecvOptions with_env_overrides(RecvOptions options, EnvLookup lookup) {
  lookup = env_or_process(lookup);
  apply(options.bundle, "FERRY_URING_BUNDLE", lookup);
  apply(options.incremental, "FERRY_URING_INCREMENTAL", lookup);
  apply(options.multishot, "FERRY_URING_MULTISHOT", lookup);
  return options;
}

nlohmann::json RecvModes::to_json() const {
  return {{"bundle", bundle}, {"incremental", incremental}, {"multishot", multishot}};
}

RecvModes resolve_modes(const RecvOptions& options, const UringFeatures& features) {
  RecvModes m;
  m.multishot =
      decide(options.multishot, features.multishot_recv, "multishot recv", "FERRY_URING_MULTISHOT");
  m.bundle = decide(options.bundle, features.bundle, "recv bundles (6.10+)", "tcp.buffers.bundle");
  m.incremental = decide(options.incremental, features.incremental,
                         "incremental buffer rings (6.12+)", "tcp.buffers.incremental");
  return m;
}

}  // namespace ferry::uring
