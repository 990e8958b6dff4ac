/* The lab benchmark's in-kernel baselines, not part of ferry:
 *  - xdp_redirect: the ceiling. Every IPv4 frame arriving on the gateway's client-side veth gets
 *    the next hop's MACs and leaves through the DEVMAP to the backend-side veth, all inside the
 *    driver's NAPI poll: no AF_XDP, no user space, no copy.
 *  - xdp_sink: the sink's counter point. Drops UDP, IPIP (DSR=1's ipip rows, which the sink's
 *    stack would answer with protocol unreachable) and ICMP destination unreachable (the ICMP
 *    row's errors) after the veth counted them in rx_packets (so the sink's own stack costs
 *    nothing); ARP, pings and the rest pass, so next hops still resolve.
 * The MACs come in as -DDST_MAC=0x..,0x.. -DSRC_MAC=... when the script compiles this file. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef DST_MAC
#define DST_MAC 0, 0, 0, 0, 0, 0
#endif
#ifndef SRC_MAC
#define SRC_MAC 0, 0, 0, 0, 0, 0
#endif

struct {
  __uint(type, BPF_MAP_TYPE_DEVMAP);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} egress SEC(".maps");

SEC("xdp")
int xdp_redirect(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data;
  void *data_end = (void *)(long)ctx->data_end;
  struct ethhdr *eth = data;
  if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  const unsigned char dst[ETH_ALEN] = {DST_MAC};
  const unsigned char src[ETH_ALEN] = {SRC_MAC};
  __builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
  __builtin_memcpy(eth->h_source, src, ETH_ALEN);
  return bpf_redirect_map(&egress, 0, XDP_PASS);
}

SEC("xdp")
int xdp_sink(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data;
  void *data_end = (void *)(long)ctx->data_end;
  struct ethhdr *eth = data;
  if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  struct iphdr *ip = (void *)(eth + 1);
  if ((void *)(ip + 1) > data_end) return XDP_PASS;
  if (ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_IPIP) return XDP_DROP;
  if (ip->protocol != IPPROTO_ICMP || ip->ihl != 5) return XDP_PASS;
  __u8 *icmp_type = (void *)(ip + 1);  /* linux/icmp.h would pull in the C library's headers */
  if ((void *)(icmp_type + 1) > data_end) return XDP_PASS;
  return *icmp_type == 3 /* destination unreachable */ ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
