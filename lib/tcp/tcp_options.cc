// The operator's tcp section turned into runtime options (see tcp_options.hh).
#include "lib/tcp/tcp_options.hh"

#include "lib/common/env.hh"
#include "lib/uring/config_bridge.hh"
#include "lib/uring/probe.hh"

namespace ferry::tcp {

runtime::IoReadyMode to_runtime(config::IoReadyMode mode) {
  switch (mode) {
    case config::IoReadyMode::global:
      return runtime::IoReadyMode::global;
    case config::IoReadyMode::index:
      return runtime::IoReadyMode::index;
    case config::IoReadyMode::inbox:
      break;
  }
  return runtime::IoReadyMode::inbox;
}

TcpOptions tcp_options_from(const config::TcpConfig& tcp, runtime::HeartbeatHook heartbeat) {
  TcpOptions out;
  const uring::UringFeatures& features = uring::kernel_features();
  runtime::RuntimeConfig& rt = out.runtime;
  rt.workers = tcp.workers;
  rt.io_ready = runtime::io_ready_with_env(to_runtime(tcp.scheduler.io_ready));
  rt.index_drain = runtime::index_drain_with_env(rt.index_drain);
  rt.name_prefix = "tcp-";
  // A multishot recv per connection plus a send or two each: size the queues for bursts.
  rt.ring.entries = 512;
  // SINGLE_ISSUER|DEFER_TASKRUN unless forced off, as on a kernel before 6.1 (which refuses it).
  rt.ring.defer_taskrun = !env_flag("FERRY_URING_NO_DEFER_TASKRUN");
  rt.recv_modes = uring::resolve_modes(
      uring::with_env_overrides(uring::recv_options_from(tcp.buffers)), features);
  rt.buffers = uring::BufferRingConfig{.count = tcp.buffers.count,
                                       .buffer_bytes = tcp.buffers.bytes,
                                       .group_id = 0,
                                       .incremental = rt.recv_modes.incremental};
  rt.recv_limits =
      uring::RecvLimits{.socket_cap_bytes = tcp.buffers.recv_credit_bytes,
                        .dormant_after = std::chrono::milliseconds(tcp.buffers.recv_credit_idle_ms),
                        .grow_streams = !env_flag("FERRY_URING_NO_STREAM_GROWTH"),
                        .check_drained = !env_flag("FERRY_URING_NO_DRAIN_CHECK")};
  rt.heartbeat = std::move(heartbeat);
  out.listener_mode = listener_mode_with_env(ListenerMode::reuseport);
  // No multishot means none at all: FERRY_URING_MULTISHOT=0 turns accepts single-shot too.
  out.multishot_accept = features.multishot_accept && rt.recv_modes.multishot;
  return out;
}

nlohmann::json TcpOptions::to_json() const {
  return {{"workers", runtime.workers},
          {"io_ready", std::string(runtime::to_string(runtime.io_ready))},
          {"index_drain", runtime.index_drain},
          {"listener", std::string(to_string(listener_mode))},
          {"multishot_accept", multishot_accept},
          {"recv", runtime.recv_modes.to_json()},
          {"buffers",
           {{"count", runtime.buffers ? runtime.buffers->count : 0},
            {"bytes", runtime.buffers ? runtime.buffers->buffer_bytes : 0},
            {"recv_credit_bytes", runtime.recv_limits.socket_cap_bytes},
            {"recv_credit_idle_ms", runtime.recv_limits.dormant_after.count()},
            {"stream_growth", runtime.recv_limits.grow_streams},
            {"drain_check", runtime.recv_limits.check_drained}}}};
}

}  // namespace ferry::tcp
