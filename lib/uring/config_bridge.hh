// Maps the operator's tcp.buffers switches (lib/config) onto the receive-path options, header-only
// so lib/uring itself needs no link dependency on lib/config.
#pragma once

#include "lib/config/config.hh"
#include "lib/uring/recv_options.hh"

namespace ferry::uring {

inline Tristate to_uring(config::Tristate value) {
  switch (value) {
    case config::Tristate::on:
      return Tristate::on;
    case config::Tristate::off:
      return Tristate::off;
    case config::Tristate::automatic:
      break;
  }
  return Tristate::automatic;
}

// Multishot has no config key: it is on wherever the kernel has it, forced off only by the
// FERRY_URING_MULTISHOT=0 test switch.
inline RecvOptions recv_options_from(const config::BufferConfig& buffers) {
  RecvOptions options;
  options.bundle = to_uring(buffers.bundle);
  options.incremental = to_uring(buffers.incremental);
  return options;
}

}  // namespace ferry::uring
