// One frame through the decap program with BPF_PROG_TEST_RUN: what the unit tests and the fuzz
// target check the program by, against the real verifier-checked program in the kernel.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::decap {

struct TestRunResult {
  std::uint32_t verdict = 0;        // XDP_PASS, XDP_DROP, ...
  std::vector<std::uint8_t> frame;  // the frame as the program left it
};

// Throws std::runtime_error when the kernel refuses the run (e.g. a frame under 14 bytes).
TestRunResult run_frame(int program_fd, const std::vector<std::uint8_t>& frame);

}  // namespace ferry::decap
