// The XDP program as a plane (see xdp_program_plane.hh).
#include "lib/lifecycle/xdp_program_plane.hh"

#include <stdexcept>

namespace ferry::lifecycle {
namespace {

using nlohmann::json;

constexpr std::string_view kMapPrefix = "map:";
constexpr std::string_view kLinkPrefix = "link:";

xdp::HandedOverXdp handed_over_from(handover::OfferPart& part) {
  xdp::HandedOverXdp out;
  std::vector<std::string> maps;
  for (const auto& [name, fd] : part.fds()) {
    if (name.starts_with(kMapPrefix)) maps.push_back(name);
  }
  for (const std::string& name : maps) {
    out.maps[name.substr(kMapPrefix.size())] = part.take_fd(name);
  }
  for (const json& l : part.fields.value("links", json::array())) {
    std::string ifname = l.value("ifname", "");
    out.links.push_back(
        {ifname, l.value("ifindex", 0),
         l.value("mode", "native") == "native" ? xdp::AttachMode::native : xdp::AttachMode::generic,
         static_cast<config::XdpMode>(l.value("requested", 0)),
         part.take_fd(std::string(kLinkPrefix) + ifname)});
  }
  out.service_ids = part.fields.value("service_ids", std::map<std::string, std::uint32_t>{});
  return out;
}

}  // namespace

void XdpProgramPlane::start(const config::Config&, handover::OfferPart* handed) {
  plane_ = std::make_unique<xdp::XdpPlane>(context_.registry);
  if (!handed) return;
  try {
    plane_->take_over(handed_over_from(*handed));
  } catch (...) {
    plane_.reset();
    throw;
  }
}

void XdpProgramPlane::apply(const config::Config& next) {
  if (!plane_) throw std::runtime_error("the XDP program is no longer this ferryd's (handed over)");
  plane_->apply(next);
}

void XdpProgramPlane::commit(const config::Config&, ApplyNotes&) {}

void XdpProgramPlane::describe(handover::OfferPart& part) {
  if (!plane_) return;
  xdp::HandedOverXdp handed = plane_->hand_over();
  json links = json::array();
  for (auto& l : handed.links) {
    links.push_back({{"ifname", l.ifname},
                     {"ifindex", l.ifindex},
                     {"mode", l.mode == xdp::AttachMode::native ? "native" : "generic"},
                     {"requested", static_cast<int>(l.requested)}});
    part.put_fd(std::string(kLinkPrefix) + l.ifname, std::move(l.link));
  }
  for (auto& [name, fd] : handed.maps) part.put_fd(std::string(kMapPrefix) + name, std::move(fd));
  part.fields = {{"links", std::move(links)}, {"service_ids", handed.service_ids}};
}

void XdpProgramPlane::release() {
  if (plane_) plane_->handed_over();
  plane_.reset();
}

}  // namespace ferry::lifecycle
