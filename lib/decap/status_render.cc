// ferry-decap status as text (a table per attachment) and as JSON.
#include "lib/decap/status_render.hh"

#include "lib/ctl/table.hh"

namespace ferry::decap {
namespace {

nlohmann::json counter_json(const PacketBytes& c) {
  return {{"packets", c.packets}, {"bytes", c.bytes}};
}

std::string attached_text(const InterfaceStatus& s) {
  if (!s.problem.empty()) return "unreadable";
  return s.ifindex ? "yes" : "no (interface gone)";
}

}  // namespace

nlohmann::json status_json(const std::string& pin_dir, const std::vector<InterfaceStatus>& all) {
  nlohmann::json interfaces = nlohmann::json::array();
  for (const auto& s : all) {
    nlohmann::json j = {{"interface", s.ifname},
                        {"ifindex", s.ifindex},
                        {"attached", s.problem.empty() && s.ifindex != 0},
                        {"mode", mode_name(s.mode)},
                        {"gue_port", s.gue_port},
                        {"program_id", s.program_id},
                        {"local_addresses", s.local_addresses}};
    nlohmann::json stripped = nlohmann::json::object(), refused = nlohmann::json::object();
    for (std::uint32_t slot = 0; slot < s.counters.size(); ++slot) {
      auto name = std::string(slot_name(slot));
      if (is_stripped(slot)) stripped[name] = counter_json(s.counters[slot]);
      if (is_refused(slot)) refused[name] = counter_json(s.counters[slot]);
    }
    j["stripped"] = stripped;
    j["passed"] = counter_json(s.counters[bpf::FERRY_DECAP_PASSED]);
    j["refused"] = refused;
    if (!s.problem.empty()) j["problem"] = s.problem;
    interfaces.push_back(j);
  }
  return {{"pin_dir", pin_dir}, {"interfaces", interfaces}};
}

std::string status_text(const std::string& pin_dir, const std::vector<InterfaceStatus>& all) {
  if (all.empty())
    return "ferry-decap is attached to no interface (pin directory " + pin_dir + ")\n";
  ctl::Table summary{"INTERFACE",   "ATTACHED", "MODE",   "GUE PORT",
                     "LOCAL ADDRS", "STRIPPED", "PASSED", "REFUSED"};
  for (const auto& s : all) {
    std::uint64_t stripped = 0, refused = 0;
    for (std::uint32_t slot = 0; slot < s.counters.size(); ++slot) {
      if (is_stripped(slot)) stripped += s.counters[slot].packets;
      if (is_refused(slot)) refused += s.counters[slot].packets;
    }
    summary.add_row(
        {s.ifname, attached_text(s), std::string(mode_name(s.mode)), std::to_string(s.gue_port),
         std::to_string(s.local_addresses), std::to_string(stripped),
         std::to_string(s.counters[bpf::FERRY_DECAP_PASSED].packets), std::to_string(refused)});
  }
  std::string out = summary.render();
  for (const auto& s : all) {
    out += "\n" + s.ifname + ":\n";
    if (!s.problem.empty()) {
      out += "  " + s.problem + "\n";
      continue;
    }
    ctl::Table counters{"COUNTER", "PACKETS", "BYTES"};
    for (std::uint32_t slot = 0; slot < s.counters.size(); ++slot) {
      const char* group = is_stripped(slot) ? "stripped " : is_refused(slot) ? "refused " : "";
      counters.add_row({group + std::string(slot_name(slot)),
                        std::to_string(s.counters[slot].packets),
                        std::to_string(s.counters[slot].bytes)});
    }
    out += counters.render();
  }
  return out;
}

}  // namespace ferry::decap
