// The XDP side of the daemon: the program (loaded only when an interface is configured), its
// attachments, their status and their counters. Lives on the control thread.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/config/config.hh"
#include "lib/metrics/registry.hh"
#include "lib/xdp/xdp_program.hh"

namespace ferry::xdp {

// What a handover carries of the XDP side: the links (which keep the program attached while they
// pass from one process to the other), the maps, and the services' counter slots.
struct HandedOverLink {
  std::string ifname;
  int ifindex = 0;
  AttachMode mode = AttachMode::native;
  config::XdpMode requested = config::XdpMode::automatic;
  UniqueFd link;
};
struct HandedOverXdp {
  SharedMaps maps;
  std::vector<HandedOverLink> links;
  std::map<std::string, std::uint32_t> service_ids;
};

class XdpPlane {
 public:
  explicit XdpPlane(metrics::Registry& registry);
  ~XdpPlane();  // detaches every interface, then unloads the program (reverse of setup)
  XdpPlane(const XdpPlane&) = delete;
  XdpPlane& operator=(const XdpPlane&) = delete;

  // Brings the attachments and maps in line with `config`: detaches interfaces no longer listed
  // or whose mode changed, attaches new ones, rewrites the services/backends/routes/drop maps.
  // On a failure the attachments made by this call are undone and std::runtime_error is thrown;
  // the caller re-applies the previous config to restore the maps.
  void apply(const config::Config& config);

  // Old side of a handover: the links and maps, with fds duplicated for the wire (none without
  // a program).
  HandedOverXdp hand_over() const;
  // New side, before the first apply(): loads this ferryd's program on the running one's maps
  // and swaps it in on the running one's links; apply() then writes the maps for this config.
  // Throws std::runtime_error (the links still run the predecessor's program).
  void take_over(HandedOverXdp handed);
  // Old side, when the handover failed after the successor swapped its program in: this
  // program runs on the links again. Logs what it cannot undo.
  void reclaim_links() noexcept;
  // Old side, once the successor serves: the links are its; the destructor only closes this
  // process's copies (and says so).
  void handed_over() { handed_over_ = true; }

  // {"program_loaded":bool,"metadata":bool,"interfaces":[{"name","ifindex","mode","attached"}]}
  nlohmann::json status() const;
  std::size_t attached_count() const { return attachments_.size(); }
  // The id the XDP maps give service `name` (XdpMapSync::id_for): what the program passes with
  // the service's frames.
  std::uint32_t service_id(const std::string& name) { return maps_.id_for(name); }
  // The loaded program (its maps), or nullptr when no interface is configured.
  const XdpProgram* program() const { return program_.get(); }

 private:
  void collect(metrics::SnapshotBuilder& out) const;

  std::unique_ptr<XdpProgram> program_;
  XdpMapSync maps_;
  std::map<std::string, std::unique_ptr<XdpAttachment>> attachments_;  // by interface name
  bool handed_over_ = false;
  metrics::Registry::Handle metrics_;  // first to go: the collector reads the members above
};

}  // namespace ferry::xdp
