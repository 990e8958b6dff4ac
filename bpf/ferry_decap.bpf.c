/* ferry-decap's XDP program, for the NIC of a direct-server-return backend: strips the IPIP and
 * GUE (variant 1) encapsulation ferry's gateway adds to frames addressed to this host and passes
 * the inner packet to the stack; passes everything that is not such a tunnel untouched, and drops
 * (counting the reason) tunnel frames it cannot strip safely. */
/* The libbpf headers need the kernel's types first. */
// clang-format off
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
// clang-format on

#include "ferry_decap_shared.h"

#define AF_INET 2
#define AF_INET6 10
#define NEXTHDR_FRAGMENT 44
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP6_OFFSET 0xfff8

struct vlan_hdr {
  __be16 tci;
  __be16 encapsulated_proto;
};

/* The IPv6 Fragment extension header (RFC 8200 4.5). */
struct frag_hdr6 {
  __u8 nexthdr;
  __u8 reserved;
  __be16 frag_off;
  __be32 identification;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, FERRY_DECAP_COUNTER_COUNT);
  __type(key, __u32);
  __type(value, struct ferry_decap_counter);
} decap_counters SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ferry_decap_config);
} decap_config SEC(".maps");

/* Locality is a map of this host's addresses that the loader fills, not bpf_fib_lookup: a backend
 * has forwarding off, and bpf_fib_lookup answers BPF_FIB_LKUP_RET_FWD_DISABLED on such an
 * interface before it looks at any route, so a local destination and a foreign one look the same.
 */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FERRY_DECAP_MAX_LOCAL_ADDRS);
  __type(key, struct ferry_decap_addr_key);
  __type(value, __u32);
} local_addrs SEC(".maps");

/* What the outer headers say: where the inner packet starts and how long the outer headers claim
 * it is, which counter slot a strip goes to, and the inner IP version the outer protocol names
 * (0 for GUE, whose payload says it itself). */
struct outer_facts {
  __u32 inner_off;
  __u32 inner_len;
  __u32 slot;
  __u32 inner_version;
  __u32 gue;
};

/* parse_outer* results besides a refusal slot. */
#define OUTER_NOT_TUNNEL 0x100
#define OUTER_TUNNEL 0x101

static __always_inline void count(__u32 slot, __u64 bytes) {
  struct ferry_decap_counter* c = bpf_map_lookup_elem(&decap_counters, &slot);
  if (c) {
    c->packets += 1;
    c->bytes += bytes;
  }
}

static __always_inline int is_local(__u32 family, const void* addr, __u32 len) {
  struct ferry_decap_addr_key key = {.family = family};
  if (len == 4)
    __builtin_memcpy(key.addr, addr, 4);
  else
    __builtin_memcpy(key.addr, addr, 16);
  return bpf_map_lookup_elem(&local_addrs, &key) != 0;
}

static __always_inline __u32 parse_outer4(struct iphdr* ip, void* data_end, __u32 l2_len,
                                          __u32 frame_len, __be16 gue_port, struct outer_facts* o) {
  if ((void*)(ip + 1) > data_end || ip->version != 4) return OUTER_NOT_TUNNEL;
  __u32 header_len = ip->ihl * 4;
  int first = !(ip->frag_off & bpf_htons(IP_OFFSET));
  __u32 udp_len = 0;
  o->gue = 0;
  if (ip->protocol == IPPROTO_IPIP) {
    o->slot = FERRY_DECAP_IPIP4_IN_4;
    o->inner_version = 4;
  } else if (ip->protocol == IPPROTO_IPV6) {
    o->slot = FERRY_DECAP_IPIP6_IN_4;
    o->inner_version = 6;
  } else if (ip->protocol == IPPROTO_UDP && gue_port != 0) {
    /* A later fragment has no ports to tell GUE from other UDP by: the stack's business. */
    if (!first || header_len < sizeof(*ip)) return OUTER_NOT_TUNNEL;
    struct udphdr* udp = (void*)ip + header_len;
    if ((void*)(udp + 1) > data_end || udp->dest != gue_port) return OUTER_NOT_TUNNEL;
    udp_len = sizeof(*udp);
    o->slot = FERRY_DECAP_GUE_IN_4;
    o->inner_version = 0;
    o->gue = 1;
  } else {
    return OUTER_NOT_TUNNEL;
  }
  if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)) return FERRY_DECAP_REFUSED_OUTER_FRAGMENT;
  if (ip->ihl != 5) return FERRY_DECAP_REFUSED_OUTER_OPTIONS;
  if (!is_local(AF_INET, &ip->daddr, 4)) return FERRY_DECAP_REFUSED_NOT_LOCAL;
  __u32 total = bpf_ntohs(ip->tot_len);
  if (total < sizeof(*ip) + udp_len || l2_len + total > frame_len)
    return FERRY_DECAP_REFUSED_OUTER_TRUNCATED;
  if (o->gue) {
    struct udphdr* udp = (void*)(ip + 1);
    if ((void*)(udp + 1) > data_end) return FERRY_DECAP_REFUSED_OUTER_TRUNCATED;
    if (bpf_ntohs(udp->len) != total - sizeof(*ip)) return FERRY_DECAP_REFUSED_OUTER_TRUNCATED;
  }
  o->inner_off = l2_len + sizeof(*ip) + udp_len;
  o->inner_len = total - sizeof(*ip) - udp_len;
  return OUTER_TUNNEL;
}

static __always_inline __u32 parse_outer6(struct ipv6hdr* ip6, void* data_end, __u32 l2_len,
                                          __u32 frame_len, __be16 gue_port, struct outer_facts* o) {
  if ((void*)(ip6 + 1) > data_end || ip6->version != 6) return OUTER_NOT_TUNNEL;
  __u8 next = ip6->nexthdr;
  __u32 header_len = sizeof(*ip6);
  int fragment = 0, first = 1;
  if (next == NEXTHDR_FRAGMENT) {
    struct frag_hdr6* fh = (void*)(ip6 + 1);
    if ((void*)(fh + 1) > data_end) return OUTER_NOT_TUNNEL;
    next = fh->nexthdr;
    fragment = 1;
    first = !(fh->frag_off & bpf_htons(IP6_OFFSET));
    header_len += sizeof(*fh);
  }
  __u32 udp_len = 0;
  o->gue = 0;
  if (next == IPPROTO_IPIP) {
    o->slot = FERRY_DECAP_IPIP4_IN_6;
    o->inner_version = 4;
  } else if (next == IPPROTO_IPV6) {
    o->slot = FERRY_DECAP_IPIP6_IN_6;
    o->inner_version = 6;
  } else if (next == IPPROTO_UDP && gue_port != 0) {
    if (!first) return OUTER_NOT_TUNNEL;
    struct udphdr* udp = (void*)ip6 + header_len;
    if ((void*)(udp + 1) > data_end || udp->dest != gue_port) return OUTER_NOT_TUNNEL;
    udp_len = sizeof(*udp);
    o->slot = FERRY_DECAP_GUE_IN_6;
    o->inner_version = 0;
    o->gue = 1;
  } else {
    return OUTER_NOT_TUNNEL;
  }
  if (fragment) return FERRY_DECAP_REFUSED_OUTER_FRAGMENT;
  if (!is_local(AF_INET6, &ip6->daddr, 16)) return FERRY_DECAP_REFUSED_NOT_LOCAL;
  __u32 payload = bpf_ntohs(ip6->payload_len);
  if (payload < udp_len || l2_len + sizeof(*ip6) + payload > frame_len)
    return FERRY_DECAP_REFUSED_OUTER_TRUNCATED;
  if (o->gue) {
    struct udphdr* udp = (void*)(ip6 + 1);
    if ((void*)(udp + 1) > data_end) return FERRY_DECAP_REFUSED_OUTER_TRUNCATED;
    if (bpf_ntohs(udp->len) != payload) return FERRY_DECAP_REFUSED_OUTER_TRUNCATED;
  }
  o->inner_off = l2_len + sizeof(*ip6) + udp_len;
  o->inner_len = payload - udp_len;
  return OUTER_TUNNEL;
}

/* Checks the inner packet against what the outer headers said; on success sets *version. */
static __always_inline __u32 check_inner(void* data, void* data_end, const struct outer_facts* o,
                                         __u32* version) {
  if (o->inner_off > 128 || o->inner_len < 1) return FERRY_DECAP_REFUSED_INNER_TRUNCATED;
  __u8* inner = data + o->inner_off;
  if ((void*)(inner + 1) > data_end) return FERRY_DECAP_REFUSED_INNER_TRUNCATED;
  __u32 v = *inner >> 4;
  /* GUE variant 1: the top two bits are 01, and the version nibble (4 or 6) names the family. */
  if (o->gue && ((*inner & 0xc0) != 0x40 || (v != 4 && v != 6)))
    return FERRY_DECAP_REFUSED_GUE_VARIANT;
  if (!o->gue && v != o->inner_version) return FERRY_DECAP_REFUSED_VERSION;
  __u32 inner_total;
  if (v == 4) {
    struct iphdr* ip = (void*)inner;
    if (o->inner_len < sizeof(*ip)) return FERRY_DECAP_REFUSED_INNER_TRUNCATED;
    if ((void*)(ip + 1) > data_end) return FERRY_DECAP_REFUSED_INNER_TRUNCATED;
    inner_total = bpf_ntohs(ip->tot_len);
    if (ip->ihl < 5 || ip->ihl * 4 > inner_total) return FERRY_DECAP_REFUSED_INNER_LENGTH;
  } else {
    struct ipv6hdr* ip6 = (void*)inner;
    if (o->inner_len < sizeof(*ip6)) return FERRY_DECAP_REFUSED_INNER_TRUNCATED;
    if ((void*)(ip6 + 1) > data_end) return FERRY_DECAP_REFUSED_INNER_TRUNCATED;
    inner_total = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
  }
  if (inner_total != o->inner_len) return FERRY_DECAP_REFUSED_INNER_LENGTH;
  *version = v;
  return OUTER_TUNNEL;
}

/* Removes the outer headers (and any Ethernet padding after the inner packet), keeping the
 * Ethernet header (with its VLAN tag, if any) and giving it the inner family's ethertype. */
static __always_inline __u32 strip(struct xdp_md* ctx, __u32 l2_len, __u32 frame_len,
                                   const struct outer_facts* o, __u32 version) {
  void* data = (void*)(long)ctx->data;
  void* data_end = (void*)(long)ctx->data_end;
  __u8 l2[ETH_HLEN + sizeof(struct vlan_hdr)];
  if (data + sizeof(l2) > data_end) return FERRY_DECAP_REFUSED_INNER_TRUNCATED;
  __builtin_memcpy(l2, data, sizeof(l2));
  int tail = (int)frame_len - (int)(o->inner_off + o->inner_len);
  if (tail > 0 && bpf_xdp_adjust_tail(ctx, -tail) != 0) return FERRY_DECAP_REFUSED_ADJUST;
  if (bpf_xdp_adjust_head(ctx, (int)(o->inner_off - l2_len)) != 0)
    return FERRY_DECAP_REFUSED_ADJUST;
  data = (void*)(long)ctx->data;
  data_end = (void*)(long)ctx->data_end;
  __be16 ethertype = bpf_htons(version == 4 ? ETH_P_IP : ETH_P_IPV6);
  if (l2_len == ETH_HLEN) {
    if (data + ETH_HLEN > data_end) return FERRY_DECAP_REFUSED_ADJUST;
    __builtin_memcpy(data, l2, ETH_HLEN - 2);
    __builtin_memcpy(data + ETH_HLEN - 2, &ethertype, 2);
  } else {
    if (data + sizeof(l2) > data_end) return FERRY_DECAP_REFUSED_ADJUST;
    __builtin_memcpy(data, l2, sizeof(l2) - 2);
    __builtin_memcpy(data + sizeof(l2) - 2, &ethertype, 2);
  }
  return OUTER_TUNNEL;
}

SEC("xdp")
int ferry_decap(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* data_end = (void*)(long)ctx->data_end;
  __u32 frame_len = data_end - data;
  struct ethhdr* eth = data;
  __u32 zero = 0;
  const struct ferry_decap_config* config = bpf_map_lookup_elem(&decap_config, &zero);
  if ((void*)(eth + 1) > data_end || !config) {
    count(FERRY_DECAP_PASSED, frame_len);
    return XDP_PASS;
  }
  __be16 proto = eth->h_proto;
  __u32 l2_len = ETH_HLEN;
  if (proto == bpf_htons(ETH_P_8021Q)) {
    struct vlan_hdr* vlan = (void*)(eth + 1);
    if ((void*)(vlan + 1) > data_end) {
      count(FERRY_DECAP_PASSED, frame_len);
      return XDP_PASS;
    }
    proto = vlan->encapsulated_proto;
    l2_len += sizeof(*vlan);
  }
  struct outer_facts o = {};
  __u32 verdict = OUTER_NOT_TUNNEL;
  if (proto == bpf_htons(ETH_P_IP))
    verdict = parse_outer4(data + l2_len, data_end, l2_len, frame_len, config->gue_port, &o);
  else if (proto == bpf_htons(ETH_P_IPV6))
    verdict = parse_outer6(data + l2_len, data_end, l2_len, frame_len, config->gue_port, &o);
  if (verdict == OUTER_NOT_TUNNEL) {
    count(FERRY_DECAP_PASSED, frame_len);
    return XDP_PASS;
  }
  __u32 version = 0;
  if (verdict == OUTER_TUNNEL) verdict = check_inner(data, data_end, &o, &version);
  if (verdict == OUTER_TUNNEL) verdict = strip(ctx, l2_len, frame_len, &o, version);
  if (verdict != OUTER_TUNNEL) {
    count(verdict < FERRY_DECAP_COUNTER_COUNT ? verdict : FERRY_DECAP_REFUSED_ADJUST, frame_len);
    return XDP_DROP;
  }
  count(o.slot, frame_len);
  return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
