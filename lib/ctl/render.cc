// Human text for each control command's result: one function per command, each tolerant of
// missing keys (skipped) and unknown keys (printed generically), never printing raw JSON rows.
#include "lib/ctl/render.hh"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "lib/ctl/table.hh"
#include "lib/ctl/units.hh"

namespace ferry::ctl {
namespace {

using json = nlohmann::json;

std::string list_table(const std::string& key, const json& rows);

bool is_object_list(const json& value) {
  return value.is_array() && !value.empty() &&
         std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_object(); });
}

// "key: value" lines. Nested objects flatten to "a.b: value" so nothing the daemon adds later
// is lost, and the lines stay greppable; lists of objects become tables after the lines.
class KeyValueLines {
 public:
  void add(std::string key, std::string value) {
    lines_.emplace_back(std::move(key), std::move(value));
  }
  void add_generic(const std::string& key, const json& value) {
    if (value.is_object() && !value.empty()) {
      for (const auto& [child, child_value] : value.items()) {
        add_generic(key + "." + child, child_value);
      }
      return;
    }
    if (is_object_list(value)) {
      tables_ += "\n" + key + ":\n" + list_table(key, value);
      return;
    }
    add(key, format_value(value));
  }
  // Everything left in `object`, prefixed with "prefix." when given.
  void add_rest(const json& object, const std::string& prefix = {}) {
    for (const auto& [key, value] : object.items()) {
      add_generic(prefix.empty() ? key : prefix + "." + key, value);
    }
  }
  std::string render() const {
    std::string out;
    for (const auto& [key, value] : lines_) out += fmt::format("{}: {}\n", key, value);
    return out;
  }
  const std::string& tables() const { return tables_; }

 private:
  std::vector<std::pair<std::string, std::string>> lines_;
  std::string tables_;
};

// Removes and returns object[key]; what is not taken is printed generically at the end.
std::optional<json> take(json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  json value = std::move(*it);
  object.erase(it);
  return value;
}

std::string yes_no(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  return format_value(value);
}

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return text;
}

bool is_scalar(const json& value) {
  return !value.is_object() && !value.is_array();
}

const json* find_array(const json& result, const char* key) {
  if (!result.is_object()) return nullptr;
  auto it = result.find(key);
  if (it == result.end() || !it->is_array()) return nullptr;
  return &*it;
}

std::string string_or(const json& object, const char* key, std::string fallback = "-") {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  return format_value(*it);
}

// A table of JSON objects: `known` columns first, then one column per further key that passes
// `extra_ok` in any row (first-seen order), headed by the key in capitals.
// A table cell for any value: objects as "k=v,k=v" (nested ones too), a list of objects as its
// length; never JSON.
std::string format_cell(const json& value) {
  if (value.is_object()) {
    std::string out;
    for (const auto& [key, child] : value.items()) {
      out += (out.empty() ? "" : ",") + key + "=" + format_cell(child);
    }
    return out.empty() ? "-" : out;
  }
  if (value.is_array() && !std::all_of(value.begin(), value.end(), is_scalar)) {
    return fmt::format("{} entries", value.size());
  }
  return format_value(value);
}

struct KnownColumn {
  const char* key;
  Column column;
  std::function<std::string(const json&)> format = format_value;
};

// Keys a table leaves out because another column already says it.
using HiddenKeys = std::vector<std::string_view>;

std::string object_rows_table(const json& rows, const std::vector<KnownColumn>& known,
                              const std::function<bool(const json&)>& extra_ok,
                              const HiddenKeys& hidden = {}) {
  std::vector<std::string> extras;
  for (const json& row : rows) {
    if (!row.is_object()) continue;
    for (const auto& [key, value] : row.items()) {
      bool is_known = std::any_of(known.begin(), known.end(),
                                  [&](const KnownColumn& k) { return key == k.key; });
      bool is_hidden = std::find(hidden.begin(), hidden.end(), key) != hidden.end();
      if (is_known || is_hidden || !extra_ok(value)) continue;
      if (std::find(extras.begin(), extras.end(), key) == extras.end()) extras.push_back(key);
    }
  }
  std::vector<Column> columns;
  for (const KnownColumn& k : known) columns.push_back(k.column);
  for (const std::string& key : extras) columns.push_back(Column{upper(key)});
  Table table(std::move(columns));
  for (const json& row : rows) {
    std::vector<std::string> cells;
    if (!row.is_object()) {
      cells.push_back(format_value(row));
      table.add_row(std::move(cells));
      continue;
    }
    for (const KnownColumn& k : known) {
      auto it = row.find(k.key);
      cells.push_back(it == row.end() || it->is_null() ? "-" : k.format(*it));
    }
    for (const std::string& key : extras) {
      auto it = row.find(key);
      cells.push_back(it == row.end() || !extra_ok(*it) ? "-" : format_cell(*it));
    }
    table.add_row(std::move(cells));
  }
  return table.render();
}

std::string histogram_cell(const json& sample) {
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = sample.find(key);
    if (it == sample.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  std::optional<double> count = number("count");
  std::optional<double> sum = number("sum");
  std::string avg = count && sum && *count > 0 ? format_number(*sum / *count) : "-";
  return fmt::format("{}/{}/{}", count ? format_number(*count) : "-",
                     sum ? format_number(*sum) : "-", avg);
}

bool is_histogram_sample(const std::string& type, const json& sample) {
  if (type == "histogram") return true;
  return type.empty() && sample.contains("buckets") && !sample.contains("value");
}

std::string age_cell(const json& age_ms) {
  return age_ms.is_number() ? format_age_ms(age_ms.get<double>()) + " ago" : format_value(age_ms);
}

const auto kAnyValue = [](const json&) { return true; };

// A list of objects in `status`: the known ones with chosen columns, others with a column per key.
std::string list_table(const std::string& key, const json& rows) {
  if (key == "health.backends") {
    return object_rows_table(rows,
                             {{"service", Column{"SERVICE", Align::left}},
                              {"address", Column{"BACKEND", Align::left}},
                              {"state", Column{"STATE", Align::left}},
                              {"last_check_age_ms", Column{"LAST CHECK", Align::right}, age_cell},
                              {"checks", Column{"CHECKS", Align::left}, format_cell},
                              {"last_error", Column{"LAST ERROR", Align::left}}},
                             kAnyValue,
                             {"checked", "up", "consecutive_failures", "consecutive_successes"});
  }
  if (key == "tcp.listeners") {
    return object_rows_table(
        rows,
        {{"service", Column{"SERVICE", Align::left}}, {"address", Column{"LISTEN", Align::left}}},
        kAnyValue);
  }
  return object_rows_table(rows, {}, kAnyValue);
}

}  // namespace

std::string format_value(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return value.get<std::string>();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return format_number(value.get<double>());
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::null:
      return "-";
    case json::value_t::array:
      if (!value.empty() && std::all_of(value.begin(), value.end(), is_scalar)) {
        std::string joined;
        for (const json& item : value) {
          if (!joined.empty()) joined += ",";
          joined += format_value(item);
        }
        return joined;
      }
      return value.dump();
    default:
      return value.dump();
  }
}

std::string format_labels(const json& labels) {
  std::string out;
  auto append = [&](const std::string& key, const json& value) {
    if (!out.empty()) out += ",";
    out += key + "=" + format_value(value);
  };
  if (labels.is_object()) {
    for (const auto& [key, value] : labels.items()) append(key, value);
  } else if (labels.is_array()) {
    for (const json& pair : labels) {
      if (pair.is_array() && pair.size() == 2 && pair[0].is_string()) {
        append(pair[0].get<std::string>(), pair[1]);
      }
    }
  }
  return out;
}

std::string series_key(std::string_view name, const json& labels) {
  return fmt::format("{}{{{}}}", name, format_labels(labels));
}

std::string render_status(const json& result) {
  if (!result.is_object()) return format_value(result) + "\n";
  json rest = result;
  KeyValueLines lines;
  std::string interfaces_table;

  for (auto [key, label] : {std::pair{"version", "version"}, {"pid", "pid"}, {"state", "state"}}) {
    if (auto v = take(rest, key)) lines.add(label, format_value(*v));
  }
  if (auto v = take(rest, "uptime_seconds")) {
    if (v->is_number()) {
      lines.add("uptime", format_duration(v->get<double>()));
    } else {
      lines.add_generic("uptime_seconds", *v);
    }
  }
  if (auto v = take(rest, "config_path")) lines.add("config", format_value(*v));
  if (auto v = take(rest, "config_loaded_at")) lines.add("config loaded at", format_value(*v));
  {
    auto reloads = take(rest, "reloads");
    auto failures = take(rest, "reload_failures");
    if (reloads && failures && reloads->is_number() && failures->is_number()) {
      lines.add("reloads",
                fmt::format("{} ({} failed)", format_value(*reloads), format_value(*failures)));
    } else {
      if (reloads) lines.add("reloads", format_value(*reloads));
      if (failures) lines.add("reload failures", format_value(*failures));
    }
  }
  if (auto v = take(rest, "last_reload_error"); v && !v->is_null()) {
    lines.add("last reload error", format_value(*v));
  }
  if (auto control = take(rest, "control")) {
    if (control->is_object()) {
      if (auto v = take(*control, "socket")) lines.add("control socket", format_value(*v));
      if (auto v = take(*control, "connections"))
        lines.add("control connections", format_value(*v));
      lines.add_rest(*control, "control");
    } else {
      lines.add_generic("control", *control);
    }
  }
  if (auto metrics = take(rest, "metrics")) {
    if (metrics->is_null()) {
      lines.add("metrics", "off");
    } else if (metrics->is_object()) {
      if (auto v = take(*metrics, "listen"))
        lines.add("metrics", v->is_null() ? "off" : format_value(*v));
      lines.add_rest(*metrics, "metrics");
    } else {
      lines.add_generic("metrics", *metrics);
    }
  }
  if (auto xdp = take(rest, "xdp")) {
    if (xdp->is_object()) {
      if (auto v = take(*xdp, "program_loaded")) {
        lines.add("xdp program",
                  v->is_boolean() ? (v->get<bool>() ? "loaded" : "not loaded") : format_value(*v));
      }
      if (auto v = take(*xdp, "metadata")) {
        lines.add("xdp metadata", !v->is_boolean() ? format_value(*v)
                                  : v->get<bool>() ? "on"
                                                   : "off (the workers match every frame)");
      }
      if (auto v = take(*xdp, "interfaces")) {
        if (v->is_array() && v->empty()) {
          lines.add("xdp interfaces", "none");
        } else if (v->is_array()) {
          interfaces_table =
              object_rows_table(*v,
                                {{"name", Column{"INTERFACE", Align::left}},
                                 {"ifindex", Column{"IFINDEX"}},
                                 {"mode", Column{"MODE", Align::left}},
                                 {"attached", Column{"ATTACHED", Align::left}, yes_no}},
                                is_scalar);
        } else {
          lines.add_generic("xdp.interfaces", *v);
        }
      }
      lines.add_rest(*xdp, "xdp");
    } else {
      lines.add_generic("xdp", *xdp);
    }
  }
  for (const char* key : {"services", "routes"}) {
    if (auto v = take(rest, key)) lines.add_generic(key, *v);
  }
  if (auto workers = take(rest, "workers")) {
    if (workers->is_object() && workers->contains("total") && workers->contains("alive")) {
      lines.add("workers", fmt::format("{} of {} alive", format_value((*workers)["alive"]),
                                       format_value((*workers)["total"])));
      workers->erase("total");
      workers->erase("alive");
      lines.add_rest(*workers, "workers");
    } else {
      lines.add_generic("workers", *workers);
    }
  }
  lines.add_rest(rest);

  std::string out = lines.render();
  if (!interfaces_table.empty()) out += "\n" + interfaces_table;
  return out + lines.tables();
}

std::string render_stats(const json& result, const SeriesRates* rates) {
  const json* families = find_array(result, "metrics");
  if (!families) return render_status(result);  // not the expected shape: show what there is
  std::vector<Column> columns = {Column{"METRIC", Align::left}, Column{"LABELS", Align::left},
                                 Column{"VALUE", Align::right}};
  if (rates) columns.push_back(Column{"RATE/s", Align::right});
  Table table(std::move(columns));
  for (const json& family : *families) {
    if (!family.is_object()) continue;
    std::string name = string_or(family, "name", "?");
    std::string type = string_or(family, "type", "");
    const json* samples = find_array(family, "samples");
    if (!samples) continue;
    for (const json& sample : *samples) {
      if (!sample.is_object()) continue;
      json labels = sample.value("labels", json::object());
      std::vector<std::string> row = {name, format_labels(labels)};
      if (is_histogram_sample(type, sample)) {
        row.push_back(histogram_cell(sample));
      } else {
        row.push_back(string_or(sample, "value"));
      }
      if (rates) {
        if (type != "counter") {
          row.emplace_back();
        } else if (auto it = rates->find(series_key(name, labels)); it != rates->end()) {
          row.push_back(format_rate(it->second));
        } else {
          row.emplace_back("-");
        }
      }
      table.add_row(std::move(row));
    }
  }
  if (table.empty()) return "no metrics\n";
  return table.render();
}

std::string render_services(const json& result) {
  const json* services = find_array(result, "services");
  if (!services) return render_status(result);
  if (services->empty()) return "no services configured\n";
  Table table{"NAME", "VIP:PORT", "PATH", "BALANCE", "CHECK", "BACKENDS"};
  for (const json& service : *services) {
    if (!service.is_object()) {
      table.add_row({format_value(service)});
      continue;
    }
    std::string vip = string_or(service, "vip");
    if (vip.find(':') != std::string::npos) vip = "[" + vip + "]";
    if (service.contains("port") && !service["port"].is_null()) {
      vip += ":" + format_value(service["port"]);
    }
    std::string backends;
    if (const json* list = find_array(service, "backends")) {
      for (const json& backend : *list) {
        if (!backends.empty()) backends += ",";
        if (backend.is_object()) {
          // "10.0.1.2:53(up)", with the weight when not 1 and the admin state when not enabled:
          // "10.0.1.3:53(up,weight 3,drain)".
          backends += string_or(backend, "address", "?");
          std::string notes;
          if (backend.contains("state")) notes = string_or(backend, "state");
          if (backend.contains("weight") && backend["weight"] != 1) {
            notes +=
                (notes.empty() ? "" : ",") + std::string("weight ") + string_or(backend, "weight");
          }
          if (backend.contains("admin") && backend["admin"] != "enabled") {
            notes += (notes.empty() ? "" : ",") + string_or(backend, "admin");
          }
          if (backend.contains("server_id")) {
            notes +=
                (notes.empty() ? "" : ",") + std::string("sid ") + string_or(backend, "server_id");
          }
          // Why the last check failed: "10.0.1.3:53(down,rcode SERVFAIL)".
          auto result = backend.find("last_result");
          if (result != backend.end() && result->is_string() && *result != "ok" &&
              backend.contains("last_reason")) {
            notes += (notes.empty() ? "" : ",") + string_or(backend, "last_reason");
          }
          if (!notes.empty()) backends += "(" + notes + ")";
        } else {
          backends += format_value(backend);
        }
      }
    }
    // "udp fastpath, tcp proxy": each protocol with the engine that serves it (a reflect
    // service's UDP is the fast path too; an echo service's TCP the runtime itself), and the
    // forwarding of an encapsulating one.
    std::string path;
    auto paths = service.find("paths");
    if (paths != service.end() && paths->is_object()) {
      for (const char* protocol : {"udp", "tcp"}) {
        if (!paths->contains(protocol)) continue;
        std::string what = string_or(*paths, protocol);
        if (string_or(service, "mode") == "reflect") what += " reflect";
        // Direct server return: "tcp fastpath ipip" (docs/dsr.md).
        if (std::string f = string_or(service, "forwarding", "nat"); f != "nat") {
          what += " " + f;
        }
        path += (path.empty() ? "" : ", ") + std::string(protocol) + " " + what;
      }
    } else {
      path = string_or(service, "protocols") + " " + string_or(service, "mode");
    }
    // "maglev, quic-lb": connection IDs decide first (docs/quic.md).
    std::string balance = string_or(service, "balance");
    auto quic_lb = service.find("quic_lb");
    if (quic_lb != service.end() && quic_lb->is_array()) balance += ", quic-lb";
    table.add_row({string_or(service, "name"), vip, path, balance, string_or(service, "check"),
                   backends.empty() ? "-" : backends});
  }
  return table.render();
}

std::string render_workers(const json& result) {
  const json* workers = find_array(result, "workers");
  if (!workers) return render_status(result);
  if (workers->empty()) return "no workers\n";
  auto heartbeat = [](const json& age) {
    return age.is_number() ? format_age_ms(age.get<double>()) : format_value(age);
  };
  return object_rows_table(*workers,
                           {{"name", Column{"NAME", Align::left}},
                            {"kind", Column{"KIND", Align::left}},
                            {"alive", Column{"ALIVE", Align::left}, yes_no},
                            {"heartbeat_age_ms", Column{"HEARTBEAT", Align::right}, heartbeat}},
                           [](const json& value) { return value.is_number(); });
}

std::string render_config(const json& result) {
  if (!result.is_object() || !result.contains("config")) return result.dump(2) + "\n";
  std::string out;
  if (result.contains("path")) out += "# " + format_value(result["path"]) + "\n";
  out += result["config"].dump(2) + "\n";
  return out;
}

std::string render_reload(const json& result) {
  if (!result.is_object()) return format_value(result) + "\n";
  bool reloaded = result.value("reloaded", true);
  std::string out = reloaded ? "reloaded" : "not reloaded";
  if (result.contains("config_path")) out += " " + format_value(result["config_path"]);
  for (const char* reason : {"message", "reason"}) {
    if (result.contains(reason)) out += ": " + format_value(result[reason]);
  }
  return out + "\n";
}

std::string render_backend(const json& result) {
  if (!result.is_object()) return format_value(result) + "\n";
  std::string out = fmt::format("{} {}: {}, weight {}", string_or(result, "service"),
                                string_or(result, "backend"), string_or(result, "admin"),
                                string_or(result, "weight"));
  if (result.contains("configured_weight") && result["configured_weight"] != result["weight"]) {
    out += fmt::format(" (configured {})", string_or(result, "configured_weight"));
  }
  if (result.contains("health")) out += ", health " + string_or(result, "health");
  if (result.contains("takes_new_traffic")) {
    out += result["takes_new_traffic"] == true ? ", takes new traffic" : ", takes no new traffic";
  }
  return out + "\n";
}

// "table 100 (protocol 70), min_backends 1" then VIP ANNOUNCED SINCE SERVICES REASON.
std::string render_announce(const json& result) {
  if (!result.is_object() || !result.contains("vips")) {
    return result.value("enabled", true) ? render_status(result)
                                         : "announce is off (no announce section in the config)\n";
  }
  std::string out =
      fmt::format("table {} (protocol {}), min_backends {}{}\n", string_or(result, "table"),
                  string_or(result, "protocol"), string_or(result, "min_backends"),
                  result.value("withdrawn", false) ? ", all withdrawn: stopping" : "");
  Table table({"VIP", "ANNOUNCED", "SINCE", "SERVICES", "REASON"});
  for (const json& vip : result["vips"]) {
    std::string reason = string_or(vip, "reason");
    if (vip.contains("error") && !vip["error"].is_null())
      reason += "; error: " + string_or(vip, "error");
    table.add_row({string_or(vip, "vip"), vip.value("announced", false) ? "yes" : "no",
                   string_or(vip, "since"), string_or(vip, "services"), reason});
  }
  return out + (table.empty() ? "no VIPs configured\n" : table.render());
}

std::string render_help(const json& result) {
  const json& commands =
      result.is_object() && result.contains("commands") ? result["commands"] : result;
  struct Entry {
    std::string name, access, summary;
  };
  std::vector<Entry> entries;
  auto from_details = [](std::string name, const json& details) {
    if (details.is_object()) {
      return Entry{std::move(name), string_or(details, "access", ""),
                   string_or(details, "summary", "")};
    }
    return Entry{std::move(name), "", format_value(details)};
  };
  if (commands.is_array()) {
    for (const json& command : commands) {
      if (command.is_object()) {
        entries.push_back(from_details(string_or(command, "name", "?"), command));
      } else {
        entries.push_back(Entry{format_value(command), "", ""});
      }
    }
  } else if (commands.is_object()) {
    for (const auto& [name, details] : commands.items()) {
      entries.push_back(from_details(name, details));
    }
  } else {
    return format_value(commands) + "\n";
  }
  if (entries.empty()) return "ferryd offers no commands\n";
  bool any_access =
      std::any_of(entries.begin(), entries.end(), [](const Entry& e) { return !e.access.empty(); });
  Table table = any_access ? Table{"COMMAND", "ACCESS", "SUMMARY"} : Table{"COMMAND", "SUMMARY"};
  for (Entry& e : entries) {
    if (any_access) {
      table.add_row(
          {std::move(e.name), e.access.empty() ? "-" : std::move(e.access), std::move(e.summary)});
    } else {
      table.add_row({std::move(e.name), std::move(e.summary)});
    }
  }
  return table.render();
}

}  // namespace ferry::ctl
