/* The one contract between bpf/ferry.bpf.c and user space: map keys, values and counter slots. */
#ifndef FERRY_BPF_SHARED_H
#define FERRY_BPF_SHARED_H

#include <linux/types.h>

#ifdef __cplusplus
namespace ferry::bpf {
#endif

/* Per-CPU counter slots of the `action_counters` array map, one per verdict. */
enum ferry_action {
  FERRY_ACTION_PASS = 0,
  FERRY_ACTION_DROP = 1,
  FERRY_ACTION_REDIRECT = 2,
  FERRY_ACTION_MALFORMED = 3,
  FERRY_ACTION_COUNT = 4,
};

struct ferry_action_counter {
  __u64 packets;
  __u64 bytes;
};

#ifdef __cplusplus
}  // namespace ferry::bpf
#endif
#endif
