/* ferry's XDP program. This first version counts every frame and passes it to the kernel; the
 * services/drop/XSK redirect logic arrives with the AF_XDP fast path. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "ferry_shared.h"

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, FERRY_ACTION_COUNT);
  __type(key, __u32);
  __type(value, struct ferry_action_counter);
} action_counters SEC(".maps");

static __always_inline int count(struct xdp_md *ctx, __u32 action, int verdict) {
  struct ferry_action_counter *c = bpf_map_lookup_elem(&action_counters, &action);
  if (c) {
    c->packets += 1;
    c->bytes += ctx->data_end - ctx->data;
  }
  return verdict;
}

SEC("xdp")
int ferry_xdp(struct xdp_md *ctx) { return count(ctx, FERRY_ACTION_PASS, XDP_PASS); }

char LICENSE[] SEC("license") = "Dual BSD/GPL";
