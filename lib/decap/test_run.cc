// One frame through the decap program with BPF_PROG_TEST_RUN.
#include "lib/decap/test_run.hh"

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ferry::decap {

TestRunResult run_frame(int program_fd, const std::vector<std::uint8_t>& frame) {
  TestRunResult result;
  result.frame.resize(frame.size() + 64);
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = result.frame.data(),
              .data_size_in = static_cast<__u32>(frame.size()),
              .data_size_out = static_cast<__u32>(result.frame.size()), .repeat = 1);
  if (bpf_prog_test_run_opts(program_fd, &opts) != 0) {
    throw std::runtime_error("BPF_PROG_TEST_RUN of a " + std::to_string(frame.size()) +
                             "-byte frame failed: " + std::strerror(errno));
  }
  result.verdict = opts.retval;
  result.frame.resize(opts.data_size_out);
  return result;
}

}  // namespace ferry::decap
