// The egress filter's attach and teardown through libbpf's TC API.
#include "lib/tunnel_check/clsact_filter.hh"

#include <bpf/libbpf.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "lib/common/log.hh"

namespace ferry::tunnel_check {
namespace {

std::string errno_text(int err) {
  return std::strerror(err < 0 ? -err : err);
}

bpf_tc_hook egress_hook(int ifindex) {
  bpf_tc_hook hook{};
  hook.sz = sizeof(hook);
  hook.ifindex = ifindex;
  hook.attach_point = BPF_TC_EGRESS;
  return hook;
}

// 0 when it created the clsact qdisc, -EEXIST when there was one. An existing qdisc is an answer
// here, not a warning libbpf should print on ferryd's stderr ("Exclusivity flag on, cannot
// modify") at every upgrade and restart.
int create_hook(bpf_tc_hook& hook) {
  libbpf_print_fn_t print = libbpf_set_print(nullptr);
  int err = bpf_tc_hook_create(&hook);
  libbpf_set_print(print);
  return err;
}

bpf_tc_opts ferry_filter(int prog_fd) {
  bpf_tc_opts opts{};
  opts.sz = sizeof(opts);
  opts.handle = kFilterHandle;
  opts.priority = kFilterPriority;
  opts.prog_fd = prog_fd;
  return opts;
}

// Detaches ferry's filter and, with `remove_qdisc`, the clsact qdisc; what is already gone is
// fine.
void remove_from(const std::string& ifname, int ifindex, bool remove_qdisc) noexcept {
  bpf_tc_hook hook = egress_hook(ifindex);
  bpf_tc_opts opts = ferry_filter(0);
  int err = bpf_tc_detach(&hook, &opts);
  // ENOENT/ENODEV/EINVAL: gone with its interface or qdisc, or removed by hand.
  if (err != 0 && err != -ENOENT && err != -ENODEV && err != -EINVAL) {
    log::warning("{}: detaching the health-check tunnel program: {}", ifname, errno_text(err));
  }
  if (!remove_qdisc) return;
  hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
  err = bpf_tc_hook_destroy(&hook);
  if (err != 0 && err != -ENOENT && err != -ENODEV && err != -EINVAL) {
    log::warning("{}: removing the clsact qdisc ferryd created: {}", ifname, errno_text(err));
  }
}

}  // namespace

ClsactFilter::ClsactFilter(const std::string& ifname, int prog_fd, bool qdisc_was_ours)
    : ifname_(ifname) {
  ifindex_ = static_cast<int>(::if_nametoindex(ifname.c_str()));
  if (ifindex_ == 0) {
    throw std::runtime_error(ifname + ": no such interface for the health-check tunnel program (" +
                             errno_text(errno) + ")");
  }
  bpf_tc_hook hook = egress_hook(ifindex_);
  int err = create_hook(hook);
  if (err != 0 && err != -EEXIST) {
    throw std::runtime_error(ifname +
                             ": creating the clsact qdisc for the health-check tunnel "
                             "program failed: " +
                             errno_text(err) + (err == -EPERM ? " (needs CAP_NET_ADMIN)" : ""));
  }
  created_qdisc_ = err == 0 || qdisc_was_ours;
  try {
    attach(prog_fd);
  } catch (...) {
    if (err == 0) {
      hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
      bpf_tc_hook_destroy(&hook);
    }
    throw;
  }
}

void ClsactFilter::attach(int prog_fd) {
  bpf_tc_hook hook = egress_hook(ifindex_);
  // A qdisc removed meanwhile (by hand, or by a successor whose takeover then failed) comes back.
  if (create_hook(hook) == 0) created_qdisc_ = true;
  bpf_tc_opts opts = ferry_filter(prog_fd);
  opts.flags = BPF_TC_F_REPLACE;
  if (int err = bpf_tc_attach(&hook, &opts); err != 0) {
    throw std::runtime_error(ifname_ +
                             ": attaching the health-check tunnel program at TC egress "
                             "failed: " +
                             errno_text(err) +
                             " (health checks of ipip and gue services need it; see "
                             "docs/health.md, \"Encapsulating services\")");
  }
}

ClsactFilter::~ClsactFilter() {
  if (!left_) remove_from(ifname_, ifindex_, created_qdisc_);
}

void ClsactFilter::remove_leftover(const std::string& ifname, bool remove_qdisc) noexcept {
  int ifindex = static_cast<int>(::if_nametoindex(ifname.c_str()));
  if (ifindex == 0) return;  // gone, and what was on it with it
  remove_from(ifname, ifindex, remove_qdisc);
  log::info("{}: removed the health-check tunnel program the previous ferryd left{}", ifname,
            remove_qdisc ? ", and its clsact qdisc" : "");
}

}  // namespace ferry::tunnel_check
