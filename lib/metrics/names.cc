// The naming rules every ferry metric obeys (Prometheus syntax plus ferry's own conventions).
#include "lib/metrics/names.hh"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ferry::metrics {
namespace {

bool is_alpha_or_underscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

bool is_valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  if (!is_alpha_or_underscore(name[0]) && name[0] != ':') return false;
  for (char c : name.substr(1)) {
    if (!is_alpha_or_underscore(c) && !is_digit(c) && c != ':') return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || !is_alpha_or_underscore(name[0])) return false;
  if (name.starts_with("__")) return false;
  for (char c : name.substr(1)) {
    if (!is_alpha_or_underscore(c) && !is_digit(c)) return false;
  }
  return true;
}

void check_family_name(std::string_view name, Type type) {
  if (!is_valid_metric_name(name)) {
    throw std::logic_error(fmt::format("metric name '{}' is not a valid Prometheus name", name));
  }
  if (!name.starts_with("ferry_")) {
    throw std::logic_error(fmt::format("metric name '{}' must start with 'ferry_'", name));
  }
  if (type == Type::counter && !name.ends_with("_total")) {
    throw std::logic_error(fmt::format("counter '{}' must end in '_total'", name));
  }
  if (type == Type::histogram && name.ends_with("_total")) {
    throw std::logic_error(fmt::format("histogram '{}' must not end in '_total'", name));
  }
}

void check_labels(std::string_view family, const Labels& labels, Type type) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string& label = labels[i].first;
    if (!is_valid_label_name(label)) {
      throw std::logic_error(fmt::format("metric '{}': label name '{}' is invalid", family, label));
    }
    if (type == Type::histogram && label == "le") {
      throw std::logic_error(
          fmt::format("histogram '{}': label 'le' is reserved for bucket bounds", family));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (labels[j].first == label) {
        throw std::logic_error(fmt::format("metric '{}': label '{}' given twice", family, label));
      }
    }
  }
}

}  // namespace ferry::metrics
