// `ferryctl top` (see top.hh): rendering a TopView as a table or JSON, and the refresh loop.
#include "lib/ctl/top.hh"

#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "lib/ctl/table.hh"
#include "lib/ctl/units.hh"
#include "lib/ctl/watch.hh"

namespace ferry::ctl {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// "1.23k", "9.84M", "0": SI-scaled and narrow, for columns whose header names the unit.
std::string compact(const std::optional<double>& value) {
  if (!value) return "-";
  std::string text = format_si(*value, "");
  while (!text.empty() && text.back() == ' ') text.pop_back();
  if (auto space = text.find(' '); space != std::string::npos) text.erase(space, 1);
  return text;
}

std::string count_cell(const std::optional<double>& value) {
  return value ? format_number(*value) : "-";
}

std::string reasons_text(const std::map<std::string, double>& by_reason) {
  std::string out;
  for (const auto& [reason, rate] : by_reason) {
    if (rate <= 0) continue;
    if (!out.empty()) out += ", ";
    out += reason + " " + format_rate(rate) + "/s";
  }
  return out;
}

// "drops: service_limit 2/s; errors: reset 0.5/s", or empty when nothing happened.
std::string reasons_line(const TopFigures& f) {
  std::string drops = reasons_text(f.drops_by_reason);
  std::string errors = reasons_text(f.errors_by_reason);
  std::string out;
  if (!drops.empty()) out += "drops: " + drops;
  if (!errors.empty()) out += (out.empty() ? "" : "; ") + std::string("errors: ") + errors;
  return out;
}

std::vector<std::string> figure_cells(const TopFigures& f) {
  return {compact(f.in_pps),
          compact(f.in_bps),
          compact(f.out_pps),
          compact(f.out_bps),
          count_cell(f.active),
          f.drops_per_second ? format_rate(*f.drops_per_second) : "-",
          f.errors_per_second ? format_rate(*f.errors_per_second) : "-"};
}

json optional_json(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

json figures_json(const TopFigures& f) {
  return {{"in_packets_per_second", optional_json(f.in_pps)},
          {"in_bits_per_second", optional_json(f.in_bps)},
          {"out_packets_per_second", optional_json(f.out_pps)},
          {"out_bits_per_second", optional_json(f.out_bps)},
          {"active", optional_json(f.active)},
          {"drops_per_second", optional_json(f.drops_per_second)},
          {"drops_by_reason", f.drops_by_reason},
          {"errors_per_second", optional_json(f.errors_per_second)},
          {"errors_by_reason", f.errors_by_reason}};
}

std::string render_frame(const TopView& view, const json& status, const TopOptions& options) {
  if (options.json) return top_json(view, status, options.interval_ms / 1000.0).dump() + "\n";
  return render_header(wall_clock(), status, view.traffic) + "\n\n" +
         render_top_table(view, options);
}

}  // namespace

std::string render_top_table(const TopView& view, const TopOptions& options) {
  std::string out;
  if (view.rows.empty()) {
    out = "no services configured\n";
  } else {
    std::vector<Column> columns = {{"SERVICE", Align::left},
                                   {"PROTO", Align::left},
                                   {"VIP:PORT", Align::left},
                                   {"PATH", Align::left},
                                   {"BACKENDS", Align::left}};
    for (const char* header :
         {"IN pkt/s", "IN bit/s", "OUT pkt/s", "OUT bit/s", "ACTIVE", "DROPS/s", "ERRORS/s"}) {
      columns.push_back({header, Align::right});
    }
    Table table(std::move(columns));
    // Lines printed under a row, outside the table's columns: reasons are too wide for a cell.
    std::vector<std::string> under;
    auto add = [&](std::vector<std::string> cells, const TopFigures& figures, int indent) {
      for (std::string& cell : figure_cells(figures)) cells.push_back(std::move(cell));
      table.add_row(std::move(cells));
      std::string line = options.reasons ? reasons_line(figures) : "";
      under.push_back(line.empty() ? line : std::string(indent, ' ') + line + "\n");
    };
    for (const TopRow& row : view.rows) {
      std::string backends =
          row.backends_total ? fmt::format("{}/{} up", *row.backends_up, *row.backends_total) : "-";
      add({row.service, row.protocol, row.endpoint, row.path, backends}, row.figures, 2);
      if (!options.backends) continue;
      for (const TopBackend& b : row.backends) {
        // "up", "up,drain", "down,disabled": health, then the operator's state when not enabled.
        std::string state = b.state;
        if (!b.admin.empty() && b.admin != "enabled") state += "," + b.admin;
        add({"  " + b.address, "", "", "", state}, b.figures, 4);
      }
    }
    std::string text = table.render();
    std::size_t line_start = text.find('\n') + 1;  // after the header
    out = text.substr(0, line_start);
    for (const std::string& extra : under) {
      std::size_t line_end = text.find('\n', line_start) + 1;
      out += text.substr(line_start, line_end - line_start) + extra;
      line_start = line_end;
    }
  }
  if (view.traffic.fastpath) {
    const TopFigures& drops = view.fastpath_drops;
    out += "\nfast path drops: " +
           (drops.drops_per_second ? format_rate(*drops.drops_per_second) + "/s" : "-/s");
    if (options.reasons) {
      if (std::string text = reasons_text(drops.drops_by_reason); !text.empty()) {
        out += " (" + text + ")";
      }
    }
    out += "\n";
  }
  return out;
}

json top_json(const TopView& view, const json& status, double interval_seconds) {
  json services = json::array();
  for (const TopRow& row : view.rows) {
    json backends = json::array();
    for (const TopBackend& b : row.backends) {
      json entry = {{"address", b.address},
                    {"state", b.state},
                    {"admin", b.admin.empty() ? json(nullptr) : json(b.admin)},
                    {"weight", optional_json(b.weight)}};
      entry.update(figures_json(b.figures));
      backends.push_back(std::move(entry));
    }
    json entry = {
        {"service", row.service},
        {"protocol", row.protocol},
        {"endpoint", row.endpoint},
        {"path", row.path},
        {"backends_up", row.backends_up ? json(*row.backends_up) : json(nullptr)},
        {"backends_total", row.backends_total ? json(*row.backends_total) : json(nullptr)}};
    entry.update(figures_json(row.figures));
    entry["backends"] = std::move(backends);
    services.push_back(std::move(entry));
  }
  const Traffic& t = view.traffic;
  json traffic = json::object();
  if (t.fastpath) {
    traffic["fastpath"] = {
        {"rx_packets_per_second", optional_json(t.fastpath_rx_pps)},
        {"rx_bits_per_second", optional_json(t.fastpath_rx_bps)},
        {"tx_packets_per_second", optional_json(t.fastpath_tx_pps)},
        {"tx_bits_per_second", optional_json(t.fastpath_tx_bps)},
        {"drops_per_second", optional_json(view.fastpath_drops.drops_per_second)},
        {"drops_by_reason", view.fastpath_drops.drops_by_reason}};
  }
  if (t.proxy) {
    traffic["proxy"] = {{"in_bits_per_second", optional_json(t.proxy_in_bps)},
                        {"out_bits_per_second", optional_json(t.proxy_out_bps)}};
  }
  json out = {{"interval_seconds", interval_seconds},
              {"services", std::move(services)},
              {"traffic", std::move(traffic)}};
  if (status.is_object()) {
    for (const char* key : {"pid", "uptime_seconds"}) {
      if (status.contains(key)) out[key] = status[key];
    }
  }
  return out;
}

void run_top(Client& client, const TopOptions& options, std::ostream& out) {
  Ticker ticker(std::chrono::milliseconds(options.interval_ms), options.stop_requested);
  json previous;
  Clock::time_point previous_at;
  bool first = true;
  for (int shown = 0; options.count == 0 || shown < options.count;) {
    if (!ticker.wait()) break;
    json status = expect_ok(client.call("status"));
    json services = expect_ok(client.call("services"));
    json stats = expect_ok(client.call("stats"));
    Clock::time_point at = Clock::now();

    std::optional<SeriesRates> rates;
    if (!first) {
      rates =
          compute_rates(previous, stats, std::chrono::duration<double>(at - previous_at).count());
    }
    const bool draw = rates || (options.clear_screen && !options.json);
    if (draw) {
      const SeriesRates* r = rates ? &*rates : nullptr;
      TopView view = build_top_view(services, StatsIndex(stats, r), options.sort);
      std::string frame = render_frame(view, status, options);
      if (options.clear_screen && !options.json) {
        out << kClearScreen;
      } else if (shown > 0 && !options.json) {
        out << "\n";
      }
      out << frame << std::flush;
      if (rates) ++shown;
    }
    previous = std::move(stats);
    previous_at = at;
    first = false;
  }
}

}  // namespace ferry::ctl
