// Encoders of a metrics snapshot: Prometheus text exposition format 0.0.4, and JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lib/metrics/registry.hh"

namespace ferry::metrics {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// HELP and TYPE for every family, label values escaped, histograms as _bucket/_sum/_count.
std::string encode_prometheus(const Snapshot& snapshot);

// {"metrics":[{"name":..,"type":"counter","help":..,"samples":[{"labels":{..},"value":..}]}]}
// Histogram samples carry {"buckets":[[le,count],..],"sum":..,"count":..} instead of "value".
// Integral values are JSON integers; +Inf, -Inf and NaN (which JSON lacks) are those strings.
nlohmann::json encode_json(const Snapshot& snapshot);

}  // namespace ferry::metrics
