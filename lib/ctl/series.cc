// Figures out of `stats` results (see series.hh).
#include "lib/ctl/series.hh"

#include <algorithm>

#include "lib/ctl/units.hh"

namespace ferry::ctl {
namespace {

using json = nlohmann::json;

// Calls fn(name, type, labels, value) for every counter or gauge sample with a numeric value.
template <typename Fn>
void for_each_sample(const json& stats, Fn&& fn) {
  if (!stats.is_object()) return;
  auto families = stats.find("metrics");
  if (families == stats.end() || !families->is_array()) return;
  for (const json& family : *families) {
    if (!family.is_object()) continue;
    std::string type = family.value("type", "");
    if (type != "counter" && type != "gauge") continue;
    auto name = family.find("name");
    auto samples = family.find("samples");
    if (name == family.end() || !name->is_string()) continue;
    if (samples == family.end() || !samples->is_array()) continue;
    for (const json& sample : *samples) {
      if (!sample.is_object()) continue;
      auto value = sample.find("value");
      if (value == sample.end() || !value->is_number()) continue;
      fn(name->get_ref<const std::string&>(), type, sample.value("labels", json::object()),
         value->get<double>());
    }
  }
}

template <typename Fn>
void for_each_counter(const json& stats, Fn&& fn) {
  for_each_sample(stats, [&](const std::string& name, const std::string& type, const json& labels,
                             double value) {
    if (type == "counter") fn(name, labels, value);
  });
}

}  // namespace

SeriesRates compute_rates(const json& previous, const json& current, double elapsed_seconds) {
  SeriesRates rates;
  if (!(elapsed_seconds > 0)) return rates;
  std::map<std::string, double> before;
  for_each_counter(previous, [&](const std::string& name, const json& labels, double value) {
    before[series_key(name, labels)] = value;
  });
  for_each_counter(current, [&](const std::string& name, const json& labels, double value) {
    std::string key = series_key(name, labels);
    auto it = before.find(key);
    if (it == before.end()) return;
    double increase = value >= it->second ? value - it->second : value;
    rates[key] = increase / elapsed_seconds;
  });
  return rates;
}

StatsIndex::StatsIndex(const json& stats, const SeriesRates* rates) {
  for_each_sample(stats, [&](const std::string& name, const std::string& type, const json& labels,
                             double value) {
    Sample s{name, {}, value, std::nullopt};
    if (labels.is_object()) {
      for (const auto& [key, label] : labels.items()) s.labels[key] = format_value(label);
    }
    if (rates && type == "counter") {
      if (auto it = rates->find(series_key(name, labels)); it != rates->end()) s.rate = it->second;
    }
    samples_.push_back(std::move(s));
  });
}

bool StatsIndex::matches(const Sample& s, std::string_view family, const LabelMatch& match) const {
  if (s.family != family) return false;
  return std::all_of(match.begin(), match.end(), [&](const auto& want) {
    auto it = s.labels.find(want.first);
    return it != s.labels.end() && it->second == want.second;
  });
}

std::optional<double> StatsIndex::value(std::string_view family, const LabelMatch& match) const {
  std::optional<double> sum;
  for (const Sample& s : samples_) {
    if (matches(s, family, match)) sum = sum.value_or(0) + s.value;
  }
  return sum;
}

std::optional<double> StatsIndex::rate(std::string_view family, const LabelMatch& match) const {
  std::optional<double> sum;
  for (const Sample& s : samples_) {
    if (s.rate && matches(s, family, match)) sum = sum.value_or(0) + *s.rate;
  }
  return sum;
}

std::map<std::string, double> StatsIndex::rates_by(std::string_view family, std::string_view label,
                                                   const LabelMatch& match) const {
  std::map<std::string, double> out;
  for (const Sample& s : samples_) {
    if (!s.rate || !matches(s, family, match)) continue;
    auto it = s.labels.find(std::string(label));
    if (it != s.labels.end()) out[it->second] += *s.rate;
  }
  return out;
}

Traffic gateway_traffic(const StatsIndex& stats) {
  Traffic t;
  t.fastpath = stats.value("ferry_xsk_rx_packets_total").has_value();
  t.fastpath_rx_pps = stats.rate("ferry_xsk_rx_packets_total");
  t.fastpath_tx_pps = stats.rate("ferry_xsk_tx_packets_total");
  auto bits = [](std::optional<double> bytes) {
    return bytes ? std::optional<double>(*bytes * 8) : std::nullopt;
  };
  t.fastpath_rx_bps = bits(stats.rate("ferry_xsk_rx_bytes_total"));
  t.fastpath_tx_bps = bits(stats.rate("ferry_xsk_tx_bytes_total"));
  t.proxy = stats.value("ferry_proxy_bytes_in_total").has_value();
  t.proxy_in_bps = bits(stats.rate("ferry_proxy_bytes_in_total"));
  t.proxy_out_bps = bits(stats.rate("ferry_proxy_bytes_out_total"));
  return t;
}

std::string format_traffic(const Traffic& t) {
  auto si = [](const std::optional<double>& v, std::string_view unit) {
    return v ? format_si(*v, unit) : "- " + std::string(unit);
  };
  std::string out;
  if (t.fastpath) {
    out += "fast path rx " + si(t.fastpath_rx_pps, "pps") + " " + si(t.fastpath_rx_bps, "bps") +
           ", tx " + si(t.fastpath_tx_pps, "pps") + " " + si(t.fastpath_tx_bps, "bps");
  }
  if (t.proxy) {
    if (!out.empty()) out += "  ";
    out += "proxy in " + si(t.proxy_in_bps, "bps") + ", out " + si(t.proxy_out_bps, "bps");
  }
  return out;
}

}  // namespace ferry::ctl
