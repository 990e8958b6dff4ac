// The XDP side of the daemon: the program, its attachments, their status and their counters.
#include "lib/xdp/xdp_plane.hh"

#include <net/if.h>

#include "lib/common/log.hh"

namespace ferry::xdp {
namespace {

constexpr const char* kActionNames[bpf::FERRY_ACTION_COUNT] = {
    "pass", "drop", "redirect", "malformed", "no_socket", "fragment"};
constexpr const char* kPacketsHelp = "Frames seen by the XDP program, by verdict.";
constexpr const char* kBytesHelp = "Bytes of frames seen by the XDP program, by verdict.";
constexpr const char* kAttachedHelp = "1 for each interface the XDP program is attached to.";
constexpr const char* kDirectionNames[bpf::FERRY_DIRECTION_COUNT] = {"in", "out"};
constexpr const char* kServicePacketsHelp =
    "Frames the XDP program matched to each service: to its VIP (in), its backends' replies (out).";
constexpr const char* kServiceBytesHelp = "Bytes of the frames matched to each service.";

// A deleted interface takes its XDP link with it; one re-created under the same name has a new
// ifindex and no program until apply() attaches it (a reload, or the re-bind when it is back).
bool still_attached(const XdpAttachment& a) {
  return ::if_nametoindex(a.ifname().c_str()) == static_cast<unsigned>(a.ifindex());
}

}  // namespace

XdpPlane::XdpPlane(metrics::Registry& registry) {
  metrics_ = registry.add([this](metrics::SnapshotBuilder& out) { collect(out); });
}

XdpPlane::~XdpPlane() {
  metrics_.reset();
  for (auto& [name, attachment] : attachments_) {
    if (handed_over_) {
      log::info("{}: XDP link handed over; this process's copy closed", name);
    } else {
      log::info("{}: detaching XDP program", name);
    }
    attachment.reset();
  }
  attachments_.clear();
  program_.reset();
}

void XdpPlane::apply(const config::Config& full) {
  const config::XdpConfig& config = full.xdp;
  std::map<std::string, const config::XdpInterfaceConfig*> wanted;
  for (const auto& iface : config.interfaces) wanted[iface.name] = &iface;

  for (auto it = attachments_.begin(); it != attachments_.end();) {
    auto w = wanted.find(it->first);
    if (w == wanted.end() || w->second->mode != it->second->requested()) {
      log::info("{}: detaching XDP program ({})", it->first,
                w == wanted.end() ? "interface removed from config" : "mode changed");
      it = attachments_.erase(it);
    } else if (!still_attached(*it->second)) {
      // The deletion itself was reported when it happened (fastpath::LinkWatch).
      log::info("{}: interface ifindex {} is gone; attaching again", it->first,
                it->second->ifindex());
      it = attachments_.erase(it);
    } else {
      ++it;
    }
  }
  if (wanted.empty()) {
    program_.reset();
    maps_ = XdpMapSync{};
    return;
  }
  if (!program_) program_ = std::make_unique<XdpProgram>();
  // Maps before new attachments: a newly attached interface steers with the new tables at once.
  maps_.apply(program_->map_fds(), full);

  std::vector<std::string> added;
  try {
    for (const auto& [name, iface] : wanted) {
      if (attachments_.count(name)) continue;
      attachments_[name] = program_->attach(*iface);
      added.push_back(name);
    }
  } catch (...) {
    for (const auto& name : added) attachments_.erase(name);
    throw;
  }
}

HandedOverXdp XdpPlane::hand_over() const {
  HandedOverXdp out;
  if (!program_) return out;
  for (const auto& [name, fd] : program_->shared_map_fds()) out.maps[name] = duplicate_fd(fd);
  for (const auto& [name, a] : attachments_) {
    out.links.push_back(
        {name, a->ifindex(), a->mode(), a->requested(), duplicate_fd(a->link_fd())});
  }
  out.service_ids = maps_.service_ids();
  return out;
}

void XdpPlane::take_over(HandedOverXdp handed) {
  if (handed.maps.empty() && handed.links.empty()) return;  // the predecessor had no program
  program_ = std::make_unique<XdpProgram>(&handed.maps);
  maps_.adopt_service_ids(handed.service_ids);
  for (HandedOverLink& l : handed.links) {
    auto a = std::make_unique<XdpAttachment>(l.ifname, l.ifindex, l.mode, std::move(l.link));
    a->set_requested(l.requested);
    a->run(program_->program_fd());
    log::info("{}: XDP link taken over, this ferryd's program swapped in ({} mode)", l.ifname,
              to_string(l.mode));
    attachments_[l.ifname] = std::move(a);
  }
}

void XdpPlane::reclaim_links() noexcept {
  if (!program_) return;
  for (const auto& [name, a] : attachments_) {
    try {
      a->run(program_->program_fd());
    } catch (const std::exception& e) {
      log::error("{}; `ferryctl reload` retries", e.what());
    }
  }
}

nlohmann::json XdpPlane::status() const {
  nlohmann::json interfaces = nlohmann::json::array();
  for (const auto& [name, a] : attachments_) {
    interfaces.push_back({{"name", name},
                          {"ifindex", a->ifindex()},
                          {"mode", std::string(to_string(a->mode()))},
                          {"attached", still_attached(*a)}});
  }
  return {{"program_loaded", program_ != nullptr},
          {"metadata", program_ != nullptr && program_->passes_metadata()},
          {"interfaces", std::move(interfaces)}};
}

void XdpPlane::collect(metrics::SnapshotBuilder& out) const {
  out.declare("ferry_xdp_packets_total", kPacketsHelp, metrics::Type::counter);
  out.declare("ferry_xdp_bytes_total", kBytesHelp, metrics::Type::counter);
  out.declare("ferry_xdp_attached", kAttachedHelp, metrics::Type::gauge);
  out.declare("ferry_xdp_service_packets_total", kServicePacketsHelp, metrics::Type::counter);
  out.declare("ferry_xdp_service_bytes_total", kServiceBytesHelp, metrics::Type::counter);
  if (program_) {
    auto totals = program_->read_action_totals();
    for (std::size_t i = 0; i < totals.size(); ++i) {
      out.counter("ferry_xdp_packets_total", kPacketsHelp, {{"action", kActionNames[i]}},
                  static_cast<double>(totals[i].packets));
      out.counter("ferry_xdp_bytes_total", kBytesHelp, {{"action", kActionNames[i]}},
                  static_cast<double>(totals[i].bytes));
    }
    for (const auto& [name, id] : maps_.service_ids()) {
      for (std::uint32_t direction = 0; direction < bpf::FERRY_DIRECTION_COUNT; ++direction) {
        auto t = program_->read_service_totals(id, direction);
        metrics::Labels labels{{"direction", kDirectionNames[direction]}, {"service", name}};
        out.counter("ferry_xdp_service_packets_total", kServicePacketsHelp, labels,
                    static_cast<double>(t.packets));
        out.counter("ferry_xdp_service_bytes_total", kServiceBytesHelp, labels,
                    static_cast<double>(t.bytes));
      }
    }
  }
  for (const auto& [name, a] : attachments_) {
    out.gauge("ferry_xdp_attached", kAttachedHelp,
              {{"iface", name}, {"mode", std::string(to_string(a->mode()))}},
              still_attached(*a) ? 1 : 0);
  }
}

}  // namespace ferry::xdp
