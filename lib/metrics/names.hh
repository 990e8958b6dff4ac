// The naming rules every ferry metric obeys (Prometheus syntax plus ferry's own conventions).
#pragma once

#include <string_view>

#include "lib/metrics/registry.hh"

namespace ferry::metrics {

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool is_valid_metric_name(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__" (reserved for Prometheus itself).
bool is_valid_label_name(std::string_view name);

// Throws std::logic_error unless `name` is a valid metric name starting with "ferry_", counters
// end in "_total" and histograms do not. A bad name is a bug in the collector, not an input error.
void check_family_name(std::string_view name, Type type);
// Throws std::logic_error on an invalid or duplicated label name, or "le" on a histogram.
void check_labels(std::string_view family, const Labels& labels, Type type);

}  // namespace ferry::metrics
