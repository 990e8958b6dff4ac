// The health-check tunnel program: load, map writes, egress attachments, counters.
#include "lib/tunnel_check/tunnel_encap.hh"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "ferry_hc.skel.h"

namespace ferry::tunnel_check {

const std::array<const char*, bpf::FERRY_HC_COUNTER_COUNT> kCounterNames = {
    "sent_ipip4", "sent_ipip6",    "sent_gue4", "sent_gue6", "no_tunnel", "not_ip",
    "gso",        "adjust_failed", "no_route",  "fib",       "interface"};

namespace {

constexpr const char* kPacketsHelp =
    "Packets of health checks through the tunnel at TC egress, by what the program did: sent_* "
    "(encapsulated and sent to the backend, by outer header) or the reason it dropped them";
constexpr const char* kBytesHelp =
    "Bytes (as the checker's socket sent them) of ferry_health_tunnel_packets_total";

constexpr const char* kRoutedHelp =
    "Health-check packets the tunnel program sent, by how it found the way to the backend: fib "
    "(bpf_fib_lookup's next hop, forwarding on) or interface (the kernel's route out of the "
    "interface the packet was on, forwarding off)";

std::string errno_text(int err) {
  return std::strerror(err < 0 ? -err : err);
}

}  // namespace

TunnelEncap::TunnelEncap(metrics::Registry& registry) {
  skeleton_ = ferry_hc_bpf__open();
  if (!skeleton_) {
    throw std::runtime_error("opening the health-check tunnel BPF object failed: " +
                             errno_text(errno));
  }
  if (int err = ferry_hc_bpf__load(skeleton_); err != 0) {
    ferry_hc_bpf__destroy(skeleton_);
    skeleton_ = nullptr;
    throw std::runtime_error(
        "loading the health-check tunnel program (bpf/ferry_hc.bpf.c) failed: " + errno_text(err) +
        (err == -EPERM ? " (needs CAP_BPF and CAP_NET_ADMIN)" : ""));
  }
  metrics_ = registry.add([this](metrics::SnapshotBuilder& out) { collect(out); });
}

TunnelEncap::~TunnelEncap() {
  metrics_.reset();
  filters_.clear();  // detached before the program goes
  ferry_hc_bpf__destroy(skeleton_);
}

int TunnelEncap::map_fd(const char* name) const {
  bpf_map* map = bpf_object__find_map_by_name(skeleton_->obj, name);
  if (!map)
    throw std::logic_error(std::string("the health-check tunnel object has no map ") + name);
  return bpf_map__fd(map);
}

void TunnelEncap::apply(const std::map<std::uint32_t, bpf::ferry_hc_tunnel>& entries,
                        const std::vector<std::string>& interfaces,
                        const std::set<std::string>& qdiscs_ours) {
  if (interfaces.size() > FERRY_HC_MAX_INTERFACES) {
    throw std::runtime_error(
        "health checks through the tunnel: at most " + std::to_string(FERRY_HC_MAX_INTERFACES) +
        " interfaces, xdp.interfaces has " + std::to_string(interfaces.size()));
  }
  int tunnels = map_fd("hc_tunnels");
  for (const auto& [mark, tunnel] : entries) {
    if (bpf_map_update_elem(tunnels, &mark, &tunnel, BPF_ANY) != 0) {
      throw std::runtime_error("writing the health-check tunnel map: " + errno_text(errno));
    }
  }
  // Stale marks go after the new ones are in: a key is deleted only once none of ours names it.
  std::vector<std::uint32_t> stale;
  std::uint32_t key = 0;
  const std::uint32_t* previous = nullptr;
  while (bpf_map_get_next_key(tunnels, previous, &key) == 0) {
    if (!entries.contains(key)) stale.push_back(key);
    previous = &key;
  }
  for (std::uint32_t mark : stale) bpf_map_delete_elem(tunnels, &mark);

  int prog_fd = program_fd();
  std::map<std::string, std::unique_ptr<ClsactFilter>> next;
  for (const std::string& name : interfaces) {
    auto it = filters_.find(name);
    if (it != filters_.end() &&
        static_cast<int>(::if_nametoindex(name.c_str())) != it->second->ifindex()) {
      // The interface went and came back (another ifindex): its filter and qdisc went with the
      // old one, whose ifindex may be another interface's now. Attach afresh.
      it->second->leave();
      filters_.erase(it);
      it = filters_.end();
    }
    if (it != filters_.end()) {
      // Again, so a program another ferryd swapped in (a failed handover) is ours again.
      it->second->attach(prog_fd);
      next.emplace(name, std::move(it->second));
      filters_.erase(it);
    } else {
      next.emplace(name, std::make_unique<ClsactFilter>(name, prog_fd, qdiscs_ours.contains(name)));
    }
  }
  filters_.swap(next);  // `next` now holds the interfaces that left: detached here
  next.clear();

  bpf::ferry_hc_config config{};
  std::size_t i = 0;
  for (const auto& [name, filter] : filters_)
    config.ifindexes[i++] = static_cast<__u32>(filter->ifindex());
  std::uint32_t zero = 0;
  if (bpf_map_update_elem(map_fd("hc_config"), &zero, &config, BPF_ANY) != 0) {
    throw std::runtime_error("writing the health-check tunnel config: " + errno_text(errno));
  }
}

std::vector<std::pair<std::string, bool>> TunnelEncap::attachments() const {
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& [name, filter] : filters_) out.emplace_back(name, filter->created_qdisc());
  return out;
}

std::vector<std::string> TunnelEncap::created_qdiscs() const {
  std::vector<std::string> out;
  for (const auto& [name, filter] : filters_) {
    if (filter->created_qdisc()) out.push_back(name);
  }
  return out;
}

void TunnelEncap::leave() noexcept {
  for (auto& [name, filter] : filters_) filter->leave();
}

int TunnelEncap::program_fd() const {
  return bpf_program__fd(skeleton_->progs.ferry_hc_encap);
}

std::map<std::uint32_t, bpf::ferry_hc_tunnel> TunnelEncap::read_entries() const {
  std::map<std::uint32_t, bpf::ferry_hc_tunnel> out;
  int fd = map_fd("hc_tunnels");
  std::uint32_t key = 0;
  const std::uint32_t* previous = nullptr;
  while (bpf_map_get_next_key(fd, previous, &key) == 0) {
    bpf::ferry_hc_tunnel value{};
    if (bpf_map_lookup_elem(fd, &key, &value) == 0) out.emplace(key, value);
    previous = &key;
  }
  return out;
}

std::array<bpf::ferry_hc_counter, bpf::FERRY_HC_COUNTER_COUNT> TunnelEncap::read_counters() const {
  std::array<bpf::ferry_hc_counter, bpf::FERRY_HC_COUNTER_COUNT> out{};
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return out;
  int fd = map_fd("hc_counters");
  std::vector<bpf::ferry_hc_counter> per_cpu(static_cast<std::size_t>(cpus));
  for (std::uint32_t slot = 0; slot < out.size(); ++slot) {
    if (bpf_map_lookup_elem(fd, &slot, per_cpu.data()) != 0) continue;
    for (const auto& c : per_cpu) {
      out[slot].packets += c.packets;
      out[slot].bytes += c.bytes;
    }
  }
  return out;
}

void TunnelEncap::collect(metrics::SnapshotBuilder& out) const {
  auto counters = read_counters();
  for (std::size_t i = bpf::FERRY_HC_RESULT_COUNT; i < counters.size(); ++i) {
    out.counter("ferry_health_tunnel_routed_packets_total", kRoutedHelp, {{"by", kCounterNames[i]}},
                static_cast<double>(counters[i].packets));
  }
  for (std::size_t i = 0; i < bpf::FERRY_HC_RESULT_COUNT; ++i) {
    metrics::Labels labels{{"result", kCounterNames[i]}};
    out.counter("ferry_health_tunnel_packets_total", kPacketsHelp, labels,
                static_cast<double>(counters[i].packets));
    out.counter("ferry_health_tunnel_bytes_total", kBytesHelp, labels,
                static_cast<double>(counters[i].bytes));
  }
}

}  // namespace ferry::tunnel_check
