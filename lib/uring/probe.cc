// One-time probe of the kernel's io_uring features the receive path can use, with the metrics
// collector that exports it (ferry_uring_feature{feature=...} 1|0).
#include "lib/uring/probe.hh"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "lib/uring/uring_compat.hh"

namespace ferry::uring {
namespace {

bool at_least(const UringFeatures& f, unsigned major, unsigned minor) {
  return f.kernel_major > major || (f.kernel_major == major && f.kernel_minor >= minor);
}

// The only reliable test for incremental consumption is the registration itself: kernels before
// 6.12 reject the unknown flag with -EINVAL.
bool incremental_ring_accepted(io_uring& ring) {
  long page_bytes = ::sysconf(_SC_PAGESIZE);
  std::size_t bytes = static_cast<std::size_t>(page_bytes > 0 ? page_bytes : 4096);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return false;
  compat::BufRingRegistration reg;
  reg.ring_addr = reinterpret_cast<std::uintptr_t>(mem);
  reg.ring_entries = 8;
  reg.bgid = 0;
  reg.flags = compat::kPbufRingIncremental;
  int rc = compat::register_buf_ring(ring.ring_fd, reg);
  if (rc == 0) compat::unregister_buf_ring(ring.ring_fd, reg.bgid);
  ::munmap(mem, bytes);
  return rc == 0;
}

}  // namespace

nlohmann::json UringFeatures::to_json() const {
  nlohmann::json j = {
      {"available", available},
      {"kernel", kernel_release},
      {"ring_features", fmt::format("{:#x}", ring_features)},
      {"multishot_recv", multishot_recv},
      {"multishot_accept", multishot_accept},
      {"bundle", bundle},
      {"incremental", incremental},
      {"send_zc", send_zc},
  };
  if (!available) j["error"] = error;
  return j;
}

UringFeatures probe_features() {
  UringFeatures f;
  utsname uts{};
  if (::uname(&uts) == 0) {
    f.kernel_release = uts.release;
    std::sscanf(uts.release, "%u.%u", &f.kernel_major, &f.kernel_minor);
  }

  io_uring ring{};
  io_uring_params params;
  std::memset(&params, 0, sizeof(params));
  int rc = io_uring_queue_init_params(4, &ring, &params);
  if (rc < 0) {
    f.error = fmt::format("io_uring_setup: {} (kernel.io_uring_disabled or seccomp?)",
                          std::strerror(-rc));
    return f;
  }
  f.available = true;
  f.ring_features = params.features;

  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  auto has_op = [&](int op) { return probe && io_uring_opcode_supported(probe, op); };
  // Multishot variants have no opcode or feature bit of their own; they arrived in known
  // releases on top of opcodes the probe does report.
  f.multishot_recv = has_op(IORING_OP_RECV) && at_least(f, 6, 0);
  f.multishot_accept = has_op(IORING_OP_ACCEPT) && at_least(f, 5, 19);
  f.send_zc = has_op(IORING_OP_SEND_ZC);
  f.bundle = (params.features & IORING_FEAT_RECVSEND_BUNDLE) != 0;
  f.incremental = incremental_ring_accepted(ring);
  if (probe) io_uring_free_probe(probe);
  io_uring_queue_exit(&ring);
  return f;
}

const UringFeatures& kernel_features() {
  static const UringFeatures features = probe_features();
  return features;
}

metrics::Registry::Handle register_feature_metrics(metrics::Registry& registry,
                                                   const UringFeatures& features) {
  return registry.add([f = features](metrics::SnapshotBuilder& b) {
    static constexpr const char* kHelp =
        "io_uring feature found by the startup probe: 1 present, 0 missing (a fallback is used).";
    const std::pair<const char*, bool> rows[] = {
        {"bundle", f.bundle},
        {"incremental", f.incremental},
        {"multishot_recv", f.multishot_recv},
        {"multishot_accept", f.multishot_accept},
        {"send_zc", f.send_zc},
    };
    for (const auto& [name, present] : rows) {
      b.gauge("ferry_uring_feature", kHelp, {{"feature", name}}, present ? 1 : 0);
    }
  });
}

}  // namespace ferry::uring
