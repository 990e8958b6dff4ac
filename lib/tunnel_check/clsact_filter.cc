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

}  // namespace

ClsactFilter::ClsactFilter(const std::string& ifname, int prog_fd, bool qdisc_was_ours)
    : ifname_(ifname) {
  ifindex_ = static_cast<int>(::if_nametoindex(ifname.c_str()));
  if (ifindex_ == 0) {
    throw std::runtime_error(ifname + ": no such interface for the health-check tunnel program (" +
                             errno_text(errno) + ")");
  }
  bpf_tc_hook hook = egress_hook(ifindex_);
  // An existing qdisc is an answer here (EEXIST: not ours), not a warning libbpf should print
  // on ferryd's stderr ("Exclusivity flag on, cannot modify") at every upgrade and restart.
  libbpf_print_fn_t print = libbpf_set_print(nullptr);
  int err = bpf_tc_hook_create(&hook);
  libbpf_set_print(print);
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
  bpf_tc_opts opts{};
  opts.sz = sizeof(opts);
  opts.handle = kFilterHandle;
  opts.priority = kFilterPriority;
  opts.prog_fd = prog_fd;
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
  if (left_) return;
  bpf_tc_hook hook = egress_hook(ifindex_);
  bpf_tc_opts opts{};
  opts.sz = sizeof(opts);
  opts.handle = kFilterHandle;
  opts.priority = kFilterPriority;
  int err = bpf_tc_detach(&hook, &opts);
  // ENOENT/ENODEV: gone with its interface or removed by hand, nothing to undo.
  if (err != 0 && err != -ENOENT && err != -ENODEV && err != -EINVAL) {
    log::warning("{}: detaching the health-check tunnel program: {}", ifname_, errno_text(err));
  }
  if (!created_qdisc_) return;
  hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
  err = bpf_tc_hook_destroy(&hook);
  if (err != 0 && err != -ENOENT && err != -ENODEV && err != -EINVAL) {
    log::warning("{}: removing the clsact qdisc ferryd created: {}", ifname_, errno_text(err));
  }
}

}  // namespace ferry::tunnel_check
