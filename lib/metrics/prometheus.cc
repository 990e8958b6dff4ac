// Encoders of a metrics snapshot: Prometheus text exposition format 0.0.4, and JSON.
#include "lib/metrics/prometheus.hh"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string_view>

namespace ferry::metrics {
namespace {

constexpr double kTwoPow63 = 9223372036854775808.0;
constexpr double kTwoPow64 = 18446744073709551616.0;

// Counters are integers held in doubles: print them as integers ("12345678901", not "1.2e+10")
// so they read naturally; everything else in the shortest form that parses back to the same
// double.
void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::trunc(v) && std::fabs(v) < kTwoPow64) {
    if (v == 0) v = 0;  // no "-0"
    fmt::format_to(std::back_inserter(out), "{:.0f}", v);
  } else {
    fmt::format_to(std::back_inserter(out), "{}", v);
  }
}

void append_escaped_help(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_escaped_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// `{a="x",b="y"}`, with an optional trailing `le` for histogram buckets; nothing when empty.
void append_labels(std::string& out, const Labels& labels, const double* le = nullptr) {
  if (labels.empty() && !le) return;
  out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    append_escaped_label_value(out, value);
    out += '"';
  }
  if (le) {
    if (!first) out += ',';
    out += "le=\"";
    append_value(out, *le);
    out += '"';
  }
  out += '}';
}

void append_sample_line(std::string& out, std::string_view name, std::string_view suffix,
                        const Labels& labels, double value, const double* le = nullptr) {
  out += name;
  out += suffix;
  append_labels(out, labels, le);
  out += ' ';
  append_value(out, value);
  out += '\n';
}

std::string_view type_name(Type type) {
  switch (type) {
    case Type::counter:
      return "counter";
    case Type::gauge:
      return "gauge";
    case Type::histogram:
      return "histogram";
  }
  return "untyped";
}

// JSON has no Inf/NaN; spell them as Prometheus does rather than let them become null.
nlohmann::json json_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::trunc(v) && v >= -kTwoPow63 && v < kTwoPow63) return static_cast<std::int64_t>(v);
  if (v == std::trunc(v) && v >= 0 && v < kTwoPow64) return static_cast<std::uint64_t>(v);
  return v;
}

}  // namespace

std::string encode_prometheus(const Snapshot& snapshot) {
  std::string out;
  out.reserve(snapshot.size() * 128);
  for (const Family& family : snapshot) {
    out += "# HELP ";
    out += family.name;
    out += ' ';
    append_escaped_help(out, family.help);
    out += "\n# TYPE ";
    out += family.name;
    out += ' ';
    out += type_name(family.type);
    out += '\n';
    for (const Sample& sample : family.samples) {
      if (family.type != Type::histogram) {
        append_sample_line(out, family.name, "", sample.labels, sample.value);
        continue;
      }
      const HistogramValue& h = sample.histogram;
      for (const auto& [bound, cumulative] : h.buckets) {
        append_sample_line(out, family.name, "_bucket", sample.labels,
                           static_cast<double>(cumulative), &bound);
      }
      const double inf = INFINITY;
      append_sample_line(out, family.name, "_bucket", sample.labels, static_cast<double>(h.count),
                         &inf);
      append_sample_line(out, family.name, "_sum", sample.labels, h.sum);
      append_sample_line(out, family.name, "_count", sample.labels, static_cast<double>(h.count));
    }
  }
  return out;
}

nlohmann::json encode_json(const Snapshot& snapshot) {
  nlohmann::json metrics = nlohmann::json::array();
  for (const Family& family : snapshot) {
    nlohmann::json samples = nlohmann::json::array();
    for (const Sample& sample : family.samples) {
      nlohmann::json labels = nlohmann::json::object();
      for (const auto& [name, value] : sample.labels) labels[name] = value;
      nlohmann::json s = {{"labels", std::move(labels)}};
      if (family.type == Type::histogram) {
        nlohmann::json buckets = nlohmann::json::array();
        for (const auto& [bound, cumulative] : sample.histogram.buckets) {
          buckets.push_back(nlohmann::json::array({json_value(bound), cumulative}));
        }
        s["buckets"] = std::move(buckets);
        s["sum"] = json_value(sample.histogram.sum);
        s["count"] = sample.histogram.count;
      } else {
        s["value"] = json_value(sample.value);
      }
      samples.push_back(std::move(s));
    }
    metrics.push_back({{"name", family.name},
                       {"type", std::string(type_name(family.type))},
                       {"help", family.help},
                       {"samples", std::move(samples)}});
  }
  return {{"metrics", std::move(metrics)}};
}

}  // namespace ferry::metrics
