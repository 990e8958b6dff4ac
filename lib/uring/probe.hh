// One-time probe of the kernel's io_uring features the receive path can use, with the metrics
// collector that exports it (ferry_uring_feature{feature=...} 1|0).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/metrics/registry.hh"

namespace ferry::uring {

struct UringFeatures {
  bool available = false;  // io_uring_setup worked at all
  std::string error;       // why not, when !available
  std::string kernel_release;
  unsigned kernel_major = 0;
  unsigned kernel_minor = 0;
  std::uint32_t ring_features = 0;  // io_uring_params.features of a probe ring

  bool multishot_recv = false;    // IORING_OP_RECV + IORING_RECV_MULTISHOT (6.0)
  bool multishot_accept = false;  // IORING_OP_ACCEPT + IORING_ACCEPT_MULTISHOT (5.19)
  bool bundle = false;            // IORING_FEAT_RECVSEND_BUNDLE (6.10)
  bool incremental = false;       // buffer ring registration with IOU_PBUF_RING_INC (6.12)
  bool send_zc = false;           // IORING_OP_SEND_ZC (6.0)

  // {"available":..,"kernel":"6.18.1","ring_features":"0x3ffff","multishot_recv":..,...}
  nlohmann::json to_json() const;
};

// Probes now, with a throwaway ring. Never throws; a kernel without io_uring gives available=false.
UringFeatures probe_features();

// The process-wide probe result: probed on first use, then cached.
const UringFeatures& kernel_features();

// Exports ferry_uring_feature{feature="bundle|incremental|multishot_recv|multishot_accept|send_zc"}
// as 1 or 0.
[[nodiscard]] metrics::Registry::Handle register_feature_metrics(metrics::Registry& registry,
                                                                 const UringFeatures& features);

}  // namespace ferry::uring
