// ferry-decap status: every attachment under the pin directory, read from its pins.
#include <arpa/inet.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "lib/decap/decap_commands.hh"
#include "lib/decap/decap_program.hh"
#include "lib/decap/interface_pins.hh"
#include "lib/decap/link_info.hh"
#include "lib/decap/local_addresses.hh"

namespace ferry::decap {
namespace {

InterfaceStatus read_one(const std::string& pin_dir, const std::string& ifname) {
  InterfaceStatus s;
  s.ifname = ifname;
  try {
    InterfacePins pins(pin_dir, ifname);
    if (!pins.has_link()) throw std::runtime_error("no link pinned (a half-removed attachment?)");
    LinkFacts link = link_facts(pins.open(link_pin).get());
    s.ifindex = link.ifindex;
    s.program_id = link.program_id;
    auto maps = pins.open_maps();
    auto config = read_config(maps.at(config_map).get());
    s.mode = config.mode;
    s.gue_port = ntohs(config.gue_port);
    s.local_addresses = read_local_addresses(maps.at(local_addrs_map).get()).size();
    s.counters = read_counters(maps.at(counters_map).get());
  } catch (const std::exception& e) {
    s.problem = e.what();
  }
  return s;
}

}  // namespace

std::vector<InterfaceStatus> status(const std::string& pin_dir) {
  std::vector<InterfaceStatus> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(pin_dir, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(pin_dir, ec)) {
    if (entry.is_directory(ec)) out.push_back(read_one(pin_dir, entry.path().filename().string()));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.ifname < b.ifname; });
  return out;
}

}  // namespace ferry::decap
