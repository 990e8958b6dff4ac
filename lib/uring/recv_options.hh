// Which receive-path features to use: auto|on|off per feature (config, then FERRY_URING_* in the
// environment for tests), resolved against the kernel probe into the modes actually run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lib/common/env.hh"
#include "lib/uring/probe.hh"

namespace ferry::uring {

// Same values as ferry::config::Tristate; lib/uring does not depend on lib/config.
enum class Tristate { automatic, on, off };

struct RecvOptions {
  Tristate bundle = Tristate::automatic;       // tcp.buffers.bundle
  Tristate incremental = Tristate::automatic;  // tcp.buffers.incremental
  Tristate multishot = Tristate::automatic;    // no config key; environment only
};

// Returns `options` with FERRY_URING_BUNDLE, FERRY_URING_INCREMENTAL and FERRY_URING_MULTISHOT
// applied: "0"/"off" forces the fallback, "1"/"on" forces the feature, "auto" or unset keeps the
// configured value. `lookup` is getenv by default (tests pass their own).
RecvOptions with_env_overrides(RecvOptions options, EnvLookup lookup = nullptr);

struct RecvModes {
  bool bundle = false;       // IORING_RECVSEND_BUNDLE: a run of buffers per completion
  bool incremental = false;  // IOU_PBUF_RING_INC: buffers consumed piecewise
  bool multishot = false;    // IORING_RECV_MULTISHOT, else one recv per completion
  nlohmann::json to_json() const;
  bool operator==(const RecvModes&) const = default;
};

// auto takes what the kernel has; on requires it and throws std::runtime_error with an operator
// hint when the kernel lacks it (a startup error, never on the data path); off never uses it.
RecvModes resolve_modes(const RecvOptions& options, const UringFeatures& features);

}  // namespace ferry::uring
