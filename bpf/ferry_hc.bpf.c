/* ferryd's TC egress program for health checks through the tunnel (docs/health.md): a packet
 * whose mark is in FERRY_HC_MARK_BASE's range comes from a check of an encapsulating service's
 * backend, addressed to the VIP; it gets the outer header the fast-path worker would give it
 * (IPIP or GUE variant 1, lib/packet/encap.hh) towards the backend the mark names, and leaves by
 * the kernel's route to that backend. Everything else passes untouched. */
/* The libbpf headers need the kernel's types first. */
// clang-format off
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
// clang-format on

#include "ferry_hc_shared.h"

#define AF_INET 2
#define AF_INET6 10
#define ENCAP_TTL 64
#define IP_DF 0x4000
#define ECN_MASK 0x03
#define ECN_CE 0x03
#define ECN_ECT0 0x02
#define GUE_SOURCE_PORT_BASE 0xc000
#define GUE_SOURCE_PORT_MASK 0x3fff
#define FLOW_LABEL_MASK 0xfffff

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FERRY_HC_MAX_TUNNELS);
  __type(key, __u32);
  __type(value, struct ferry_hc_tunnel);
} hc_tunnels SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ferry_hc_config);
} hc_config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, FERRY_HC_COUNTER_COUNT);
  __type(key, __u32);
  __type(value, struct ferry_hc_counter);
} hc_counters SEC(".maps");

/* What the outer header and the GUE checksum take from the inner packet. */
struct inner_facts {
  __u32 ip_bytes; /* the whole inner IP packet */
  __u32 header_bytes;
  __u8 v6;
  __u8 tos;
  __u8 dont_fragment;
  __u8 protocol;
  union {
    struct iphdr ip4;
    struct ipv6hdr ip6;
  } header;
};

static __always_inline int count(__u32 slot, __u64 bytes, int verdict) {
  struct ferry_hc_counter* c = bpf_map_lookup_elem(&hc_counters, &slot);
  if (c) {
    c->packets += 1;
    c->bytes += bytes;
  }
  return verdict;
}

static __always_inline __u16 fold(__u64 sum) {
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return (__u16)sum;
}

/* The one's complement sum of `size` bytes (a multiple of 4, at most 512) on the stack. */
static __always_inline __u64 sum_of(void* bytes, __u32 size) {
  return (__u32)bpf_csum_diff(0, 0, bytes, size, 0);
}

/* RFC 6040 normal mode, as lib/packet/encap.cc: DSCP and ECN copied, CE sent as ECT(0). */
static __always_inline __u8 outer_tos(__u8 inner) {
  __u8 ecn = inner & ECN_MASK;
  return (inner & ~ECN_MASK) | (ecn == ECN_CE ? ECN_ECT0 : ecn);
}

/* Reads the inner IPv4 (no options) or IPv6 packet after the Ethernet header; 0 when it is not
 * one of those carrying TCP or UDP (what a check's socket sends). */
static __always_inline int read_inner(struct __sk_buff* skb, struct inner_facts* in) {
  __be16 ethertype;
  if (bpf_skb_load_bytes(skb, offsetof(struct ethhdr, h_proto), &ethertype, 2)) return 0;
  if (ethertype == bpf_htons(ETH_P_IP)) {
    struct iphdr* ip = &in->header.ip4;
    if (bpf_skb_load_bytes(skb, ETH_HLEN, ip, sizeof(*ip))) return 0;
    if (ip->version != 4 || ip->ihl != 5) return 0;
    in->v6 = 0;
    in->header_bytes = sizeof(*ip);
    in->ip_bytes = bpf_ntohs(ip->tot_len);
    in->tos = ip->tos;
    in->dont_fragment = (ip->frag_off & bpf_htons(IP_DF)) != 0;
    in->protocol = ip->protocol;
  } else if (ethertype == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr* ip6 = &in->header.ip6;
    if (bpf_skb_load_bytes(skb, ETH_HLEN, ip6, sizeof(*ip6))) return 0;
    if (ip6->version != 6) return 0;
    in->v6 = 1;
    in->header_bytes = sizeof(*ip6);
    in->ip_bytes = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
    in->tos = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
    /* An IPv6 packet is never fragmented on its way: its tunnel may not be either. */
    in->dont_fragment = 1;
    in->protocol = ip6->nexthdr;
  } else {
    return 0;
  }
  if (in->protocol != IPPROTO_TCP && in->protocol != IPPROTO_UDP) return 0;
  return in->ip_bytes > in->header_bytes && ETH_HLEN + in->ip_bytes <= skb->len;
}

/* The sum over the inner TCP or UDP segment once its checksum is final: the complement of its
 * pseudo-header's sum, whether the checksum is already written or left to the NIC
 * (CHECKSUM_PARTIAL, whose seed is the pseudo-header's sum): the kernel's lco_csum(). */
static __always_inline __u64 inner_l4_sum(struct inner_facts* in) {
  __u32 l4_bytes = in->ip_bytes - in->header_bytes;
  if (in->v6) {
    struct {
      struct in6_addr source;
      struct in6_addr destination;
      __be32 length;
      __be32 next_header;
    } pseudo = {in->header.ip6.saddr, in->header.ip6.daddr, bpf_htonl(l4_bytes),
                bpf_htonl(in->protocol)};
    return (__u16)~fold(sum_of(&pseudo, sizeof(pseudo)));
  }
  struct {
    __be32 source;
    __be32 destination;
    __u8 zero;
    __u8 protocol;
    __be16 length;
  } pseudo = {in->header.ip4.saddr, in->header.ip4.daddr, 0, in->protocol, bpf_htons(l4_bytes)};
  return (__u16)~fold(sum_of(&pseudo, sizeof(pseudo)));
}

/* GUE over IPv6 must carry a UDP checksum (RFC 6935): over the pseudo-header, the UDP header and
 * the inner packet, whose payload is summed as inner_l4_sum() says. */
static __always_inline __u16 gue6_checksum(const struct ipv6hdr* outer, struct udphdr* udp,
                                           struct inner_facts* in) {
  struct {
    struct in6_addr source;
    struct in6_addr destination;
    __be32 length;
    __be32 next_header;
  } pseudo = {outer->saddr, outer->daddr, bpf_htonl(bpf_ntohs(udp->len)), bpf_htonl(IPPROTO_UDP)};
  __u64 sum = sum_of(&pseudo, sizeof(pseudo)) + sum_of(udp, sizeof(*udp));
  if (in->v6)
    sum += sum_of(&in->header.ip6, sizeof(in->header.ip6));
  else
    sum += sum_of(&in->header.ip4, sizeof(in->header.ip4));
  sum += inner_l4_sum(in);
  __u16 check = ~fold(sum);
  return check ? check : 0xffff;
}

/* Sends the encapsulated packet by the kernel's route to its outer destination. bpf_fib_lookup
 * answers only on an interface with forwarding on (it is a forwarding lookup): then the packet
 * may leave by any interface the program is attached to, the one it is on first. With forwarding
 * off (a gateway whose fast path does the forwarding), it leaves by the interface it is on, by
 * the kernel's route to the backend through that interface (bpf_redirect_neigh's own lookup, the
 * way a packet sent with SO_BINDTODEVICE would go). Either way the kernel resolves the next hop's
 * MAC, queueing the packet meanwhile, as for any packet it sends. */
static __always_inline int redirect_to_backend(struct __sk_buff* skb,
                                               const struct ferry_hc_tunnel* t, __u32 slot,
                                               __u64 bytes) {
  __u32 zero = 0;
  struct ferry_hc_config* cfg = bpf_map_lookup_elem(&hc_config, &zero);
  struct bpf_fib_lookup fib;
#pragma unroll
  for (int i = 0; i <= FERRY_HC_MAX_INTERFACES; ++i) {
    __u32 ifindex = skb->ifindex;
    if (i > 0) {
      if (!cfg) break;
      ifindex = cfg->ifindexes[i - 1];
      if (ifindex == 0) break;
      if (ifindex == skb->ifindex) continue;
    }
    __builtin_memset(&fib, 0, sizeof(fib));
    fib.ifindex = ifindex;
    if (t->family == AF_INET6) {
      fib.family = AF_INET6;
      __builtin_memcpy(fib.ipv6_src, t->source, 16);
      __builtin_memcpy(fib.ipv6_dst, t->destination, 16);
    } else {
      fib.family = AF_INET;
      __builtin_memcpy(&fib.ipv4_src, t->source, 4);
      __builtin_memcpy(&fib.ipv4_dst, t->destination, 4);
    }
    long rc =
        bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_OUTPUT | BPF_FIB_LOOKUP_SKIP_NEIGH);
    if (rc == BPF_FIB_LKUP_RET_FWD_DISABLED && i == 0) {
      count(slot, bytes, 0);
      count(FERRY_HC_ROUTED_INTERFACE, bytes, 0);
      return bpf_redirect_neigh(skb->ifindex, 0, 0, 0);
    }
    if (rc != BPF_FIB_LKUP_RET_SUCCESS) continue;
    /* The next hop the route names (the backend itself when on-link). */
    struct bpf_redir_neigh nh = {};
    nh.nh_family = fib.family;
    if (fib.family == AF_INET6)
      __builtin_memcpy(nh.ipv6_nh, fib.ipv6_dst, 16);
    else
      nh.ipv4_nh = fib.ipv4_dst;
    count(slot, bytes, 0);
    count(FERRY_HC_ROUTED_FIB, bytes, 0);
    return bpf_redirect_neigh(fib.ifindex, &nh, sizeof(nh), 0);
  }
  return count(FERRY_HC_DROP_NO_ROUTE, bytes, TC_ACT_SHOT);
}

SEC("tc")
int ferry_hc_encap(struct __sk_buff* skb) {
  __u32 mark = skb->mark;
  if ((mark & FERRY_HC_MARK_MASK) != FERRY_HC_MARK_BASE) return TC_ACT_OK;
  __u64 bytes = skb->len;
  struct ferry_hc_tunnel* found = bpf_map_lookup_elem(&hc_tunnels, &mark);
  /* Never let a check's packet reach the VIP's route bare: it would test the wrong thing. */
  if (!found) return count(FERRY_HC_DROP_NO_TUNNEL, bytes, TC_ACT_SHOT);
  struct ferry_hc_tunnel t = *found;
  struct inner_facts in = {};
  if (!read_inner(skb, &in)) return count(FERRY_HC_DROP_NOT_IP, bytes, TC_ACT_SHOT);

  int outer_v6 = t.family == AF_INET6;
  int gue = t.kind == FERRY_HC_GUE;
  __u32 ip_bytes = outer_v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
  __u32 overhead = ip_bytes + (gue ? sizeof(struct udphdr) : 0);
  if (gue && outer_v6 && skb->gso_segs > 1) return count(FERRY_HC_DROP_GSO, bytes, TC_ACT_SHOT);
  __u64 flags = (outer_v6 ? BPF_F_ADJ_ROOM_ENCAP_L3_IPV6 : BPF_F_ADJ_ROOM_ENCAP_L3_IPV4) |
                (gue ? BPF_F_ADJ_ROOM_ENCAP_L4_UDP : 0);
  if (bpf_skb_adjust_room(skb, overhead, BPF_ADJ_ROOM_MAC, flags))
    return count(FERRY_HC_DROP_ADJUST, bytes, TC_ACT_SHOT);

  __u32 hash = bpf_get_hash_recalc(skb);
  __u8 tos = outer_tos(in.tos);
  __u8 protocol = gue ? IPPROTO_UDP : (in.v6 ? IPPROTO_IPV6 : IPPROTO_IPIP);
  __u32 outer_bytes = in.ip_bytes + overhead;
  struct ipv6hdr outer6 = {};
  int stored;
  if (outer_v6) {
    outer6.version = 6;
    outer6.priority = tos >> 4;
    __u32 label = hash & FLOW_LABEL_MASK;
    outer6.flow_lbl[0] = ((tos & 0x0f) << 4) | (label >> 16);
    outer6.flow_lbl[1] = label >> 8;
    outer6.flow_lbl[2] = label;
    outer6.payload_len = bpf_htons(outer_bytes - sizeof(outer6));
    outer6.nexthdr = protocol;
    outer6.hop_limit = ENCAP_TTL;
    __builtin_memcpy(&outer6.saddr, t.source, 16);
    __builtin_memcpy(&outer6.daddr, t.destination, 16);
    stored = bpf_skb_store_bytes(skb, ETH_HLEN, &outer6, sizeof(outer6), 0);
  } else {
    struct iphdr outer4 = {};
    outer4.version = 4;
    outer4.ihl = 5;
    outer4.tos = tos;
    outer4.tot_len = bpf_htons(outer_bytes);
    outer4.id = (__u16)bpf_get_prandom_u32();
    outer4.frag_off = in.dont_fragment ? bpf_htons(IP_DF) : 0;
    outer4.ttl = ENCAP_TTL;
    outer4.protocol = protocol;
    __builtin_memcpy(&outer4.saddr, t.source, 4);
    __builtin_memcpy(&outer4.daddr, t.destination, 4);
    outer4.check = ~fold(sum_of(&outer4, sizeof(outer4)));
    stored = bpf_skb_store_bytes(skb, ETH_HLEN, &outer4, sizeof(outer4), 0);
  }
  if (!stored && gue) {
    struct udphdr udp = {};
    udp.source = bpf_htons(GUE_SOURCE_PORT_BASE | (hash & GUE_SOURCE_PORT_MASK));
    udp.dest = t.gue_port;
    udp.len = bpf_htons(sizeof(udp) + in.ip_bytes);
    /* IPv4: no checksum (RFC 768, 6935 for tunnels), as the worker sends it. */
    if (outer_v6) udp.check = gue6_checksum(&outer6, &udp, &in);
    stored = bpf_skb_store_bytes(skb, ETH_HLEN + ip_bytes, &udp, sizeof(udp), 0);
  }
  __be16 ethertype = bpf_htons(outer_v6 ? ETH_P_IPV6 : ETH_P_IP);
  if (!stored)
    stored = bpf_skb_store_bytes(skb, offsetof(struct ethhdr, h_proto), &ethertype, 2, 0);
  if (stored) return count(FERRY_HC_DROP_ADJUST, bytes, TC_ACT_SHOT);

  /* The redirected packet passes this hook again: unmarked, it is let through. */
  skb->mark = 0;
  __u32 slot = (outer_v6 ? FERRY_HC_SENT_IPIP6 : FERRY_HC_SENT_IPIP4) + (gue ? 2 : 0);
  return redirect_to_backend(skb, &t, slot, bytes);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
