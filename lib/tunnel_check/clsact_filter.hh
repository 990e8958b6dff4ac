// A BPF program attached as a direct-action filter at an interface's TC egress hook (libbpf's
// bpf_tc_hook_create / bpf_tc_attach), owned like any kernel object: the destructor detaches it
// and removes the clsact qdisc, but the qdisc only if this filter created it.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::tunnel_check {

// ferry's filter at egress: one handle and priority, so an attach replaces a filter a previous
// ferryd left (killed, or handed over) instead of adding a second one.
inline constexpr std::uint32_t kFilterHandle = 0xfe;
inline constexpr std::uint32_t kFilterPriority = 0xfe;

class ClsactFilter {
 public:
  // Attaches `prog_fd` at `ifname`'s egress, creating its clsact qdisc when it has none.
  // `qdisc_was_ours`: a ferryd this one took over created the qdisc, so this one removes it.
  // Throws std::runtime_error saying what failed and what to check.
  ClsactFilter(const std::string& ifname, int prog_fd, bool qdisc_was_ours = false);
  ~ClsactFilter();
  ClsactFilter(const ClsactFilter&) = delete;
  ClsactFilter& operator=(const ClsactFilter&) = delete;

  // Attaches again (replacing whatever sits at ferry's handle and priority; creating the qdisc
  // again if it went). Throws.
  void attach(int prog_fd);
  // Handed over to another ferryd: the destructor leaves the filter and the qdisc.
  void leave() noexcept { left_ = true; }

  // What a predecessor left that this ferryd does not take: ferry's filter at `ifname`'s
  // egress, and its clsact qdisc when `remove_qdisc` (the predecessor created it). Logs, never
  // throws.
  static void remove_leftover(const std::string& ifname, bool remove_qdisc) noexcept;

  const std::string& ifname() const { return ifname_; }
  int ifindex() const { return ifindex_; }
  bool created_qdisc() const { return created_qdisc_; }

 private:
  std::string ifname_;
  int ifindex_ = 0;
  bool created_qdisc_ = false;
  bool left_ = false;
};

}  // namespace ferry::tunnel_check
