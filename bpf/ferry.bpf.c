/* ferry's XDP program: parses Ethernet (up to two VLAN tags), IPv4/IPv6 and UDP/TCP with
 * verifier-proof bounds checks; drops sources on the drop list; steers UDP for configured services,
 * their backends' replies and routed prefixes into the queue's AF_XDP socket, with every fragment
 * of such a datagram and the ICMP errors about one; passes everything else (TCP, other ICMP,
 * other fragments and extension headers, malformed frames) to the kernel. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "ferry_shared.h"

#define AF_INET 2
#define AF_INET6 10
#define VLAN_MAX_DEPTH 2

struct vlan_hdr {
  __be16 tci;
  __be16 encapsulated_proto;
};

/* The first 4 bytes of an ICMP or ICMPv6 header; the 4 after them depend on the type. Errors:
 * ICMP destination unreachable (3), time exceeded (11), parameter problem (12); ICMPv6 destination
 * unreachable (1), packet too big (2), time exceeded (3), parameter problem (4). */
struct icmp_head {
  __u8 type;
  __u8 code;
  __be16 checksum;
  __be32 rest;
};
#define ICMP4_DEST_UNREACH 3
#define ICMP4_TIME_EXCEEDED 11
#define ICMP4_PARAMETER_PROBLEM 12
#define ICMP6_DEST_UNREACH 1
#define ICMP6_PARAMETER_PROBLEM 4

/* The IPv6 Fragment extension header (RFC 8200 4.5). */
struct frag_hdr6 {
  __u8 nexthdr;
  __u8 reserved;
  __be16 frag_off; /* offset in 8-byte units << 3 | M */
  __be32 identification;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, FERRY_ACTION_COUNT);
  __type(key, __u32);
  __type(value, struct ferry_action_counter);
} action_counters SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, FERRY_SERVICE_COUNTER_SLOTS);
  __type(key, __u32);
  __type(value, struct ferry_action_counter);
} service_counters SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FERRY_MAX_SERVICES);
  __type(key, struct ferry_endpoint_key);
  __type(value, struct ferry_service_value);
} services SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FERRY_MAX_BACKENDS);
  __type(key, struct ferry_endpoint_key);
  __type(value, struct ferry_service_value);
} backends SEC(".maps");

/* (family, address) with proto and port 0 -> 1: the gateway's own addresses. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FERRY_MAX_LOCAL_ADDRS);
  __type(key, struct ferry_endpoint_key);
  __type(value, __u32);
} local_addrs SEC(".maps");

/* (family, IPPROTO_UDP, 0, address) -> FERRY_HOST_*: where a fragment without ports belongs. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FERRY_MAX_UDP_HOSTS);
  __type(key, struct ferry_endpoint_key);
  __type(value, __u32);
} udp_hosts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, FERRY_MAX_DROP_PREFIXES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct ferry_lpm4_key);
  __type(value, __u32);
} drop4 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, FERRY_MAX_DROP_PREFIXES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct ferry_lpm6_key);
  __type(value, __u32);
} drop6 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, FERRY_MAX_ROUTES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct ferry_lpm4_key);
  __type(value, struct ferry_route_value);
} routes4 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, FERRY_MAX_ROUTES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct ferry_lpm6_key);
  __type(value, struct ferry_route_value);
} routes6 SEC(".maps");

/* ifindex -> interface slot, written by user space for every interface it binds sockets on. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FERRY_MAX_INTERFACES);
  __type(key, __u32);
  __type(value, __u32);
} ifslots SEC(".maps");

/* ferry_xsk_key(slot, queue) -> AF_XDP socket bound to that interface and queue. */
struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, FERRY_XSKMAP_ENTRIES);
  __type(key, __u32);
  __type(value, __u32);
} xsks SEC(".maps");

static __always_inline void count_into(void *map, __u32 slot, __u64 bytes) {
  struct ferry_action_counter *c = bpf_map_lookup_elem(map, &slot);
  if (c) {
    c->packets += 1;
    c->bytes += bytes;
  }
}

static __always_inline int verdict(struct xdp_md *ctx, __u32 action, int xdp_action) {
  count_into(&action_counters, action, ctx->data_end - ctx->data);
  return xdp_action;
}

/* Set by ferryd before the load: 0 on a kernel whose verifier refuses bpf_xdp_adjust_meta to XDP
 * programs (the call is then dead code the verifier never checks) or when FERRY_XDP_METADATA=0. */
const volatile __u32 pass_metadata = 1;

/* Writes what was decided into the metadata area before the packet for the worker; a driver
 * without metadata support refuses, and the worker then matches the frame itself. Invalidates
 * every packet pointer: only steer() calls it, after the last read of the packet. */
static __always_inline void pass_decision(struct xdp_md *ctx, __u32 service_id, __u32 kind,
                                          __u32 backend) {
  if (!pass_metadata) return;
  if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct ferry_frame_meta)) != 0) return;
  struct ferry_frame_meta *meta = (void *)(long)ctx->data_meta;
  if ((void *)(meta + 1) > (void *)(long)ctx->data) return;
  meta->magic = FERRY_META_MAGIC;
  meta->service_id = service_id;
  meta->backend = backend;
  meta->kind = kind;
}

/* Steers the frame into the AF_XDP socket of its (interface, rx queue); an interface without a
 * slot or an unbound queue falls back to the kernel. The service counter counts every match, by
 * direction; the action counter says whether it was redirected. `kind` and `backend` go to the
 * worker with the frame (struct ferry_frame_meta). */
static __always_inline int steer(struct xdp_md *ctx, __u32 service_id, __u32 direction,
                                 __u32 kind, __u32 backend) {
  __u64 bytes = ctx->data_end - ctx->data;
  if (service_id < FERRY_MAX_SERVICES) {
    count_into(&service_counters, ferry_service_slot(service_id, direction), bytes);
  }
  __u32 ifindex = ctx->ingress_ifindex;
  __u32 *slot = bpf_map_lookup_elem(&ifslots, &ifindex);
  __u32 queue = ctx->rx_queue_index;
  if (!slot || *slot >= FERRY_MAX_INTERFACES || queue >= FERRY_MAX_QUEUES) {
    return verdict(ctx, FERRY_ACTION_NO_SOCKET, XDP_PASS);
  }
  __u32 key = ferry_xsk_key(*slot, queue);
  pass_decision(ctx, service_id, kind, backend);
  int rc = bpf_redirect_map(&xsks, key, XDP_PASS);
  if (rc != XDP_REDIRECT) return verdict(ctx, FERRY_ACTION_NO_SOCKET, XDP_PASS);
  count_into(&action_counters, FERRY_ACTION_REDIRECT, bytes);
  return XDP_REDIRECT;
}

/* UDP to a service VIP, from a backend (a reply), or to a routed prefix goes to AF_XDP. */
static __always_inline int classify_udp(struct xdp_md *ctx, struct ferry_endpoint_key *dst,
                                        struct ferry_endpoint_key *src, int routed,
                                        __u32 pass_action) {
  struct ferry_service_value *svc = bpf_map_lookup_elem(&services, dst);
  if (svc) return steer(ctx, svc->service_id, FERRY_DIRECTION_IN, FERRY_META_TO_SERVICE, 0);
  svc = bpf_map_lookup_elem(&backends, src);
  if (svc) {
    /* Replies go to clients; one addressed to the gateway itself answers a local socket (the
     * health checker's udp and dns checks), which the kernel must get. */
    if (svc->flags & FERRY_BACKEND_LOCAL_REPLIES) {
      struct ferry_endpoint_key local = {.family = dst->family};
      __builtin_memcpy(local.addr, dst->addr, sizeof(local.addr));
      if (bpf_map_lookup_elem(&local_addrs, &local)) {
        return verdict(ctx, pass_action, XDP_PASS);
      }
    }
    return steer(ctx, svc->service_id, FERRY_DIRECTION_OUT, FERRY_META_FROM_BACKEND,
                 svc->flags >> FERRY_BACKEND_INDEX_SHIFT);
  }
  if (routed) return steer(ctx, FERRY_MAX_SERVICES, FERRY_DIRECTION_IN, FERRY_META_NONE, 0);
  return verdict(ctx, pass_action, XDP_PASS);
}

static __always_inline void copy_addr(__u8 *to, const __u8 *from, __u32 addr_len) {
  if (addr_len == 4) {
    __builtin_memcpy(to, from, 4);
  } else {
    __builtin_memcpy(to, from, 16);
  }
}

static __always_inline int is_local(__u8 family, const __u8 *addr, __u32 addr_len) {
  struct ferry_endpoint_key local = {.family = family};
  copy_addr(local.addr, addr, addr_len);
  return bpf_map_lookup_elem(&local_addrs, &local) != 0;
}

/* A fragment after the first of a UDP datagram carries no ports: it goes where its addresses say
 * the datagram goes (to a VIP, from a backend to anyone but the gateway, to a routed prefix); the
 * worker follows its first fragment's translation. */
static __always_inline int classify_udp_tail(struct xdp_md *ctx, __u8 family, const __u8 *saddr,
                                             const __u8 *daddr, __u32 addr_len, int routed) {
  struct ferry_endpoint_key host = {.family = family, .proto = IPPROTO_UDP};
  copy_addr(host.addr, daddr, addr_len);
  __u32 *flags = bpf_map_lookup_elem(&udp_hosts, &host);
  if (flags && (*flags & FERRY_HOST_VIP)) {
    return steer(ctx, FERRY_MAX_SERVICES, FERRY_DIRECTION_IN, FERRY_META_NONE, 0);
  }
  copy_addr(host.addr, saddr, addr_len);
  flags = bpf_map_lookup_elem(&udp_hosts, &host);
  if (flags && (*flags & FERRY_HOST_BACKEND) && !is_local(family, daddr, addr_len)) {
    return steer(ctx, FERRY_MAX_SERVICES, FERRY_DIRECTION_OUT, FERRY_META_NONE, 0);
  }
  if (routed) return steer(ctx, FERRY_MAX_SERVICES, FERRY_DIRECTION_IN, FERRY_META_NONE, 0);
  return verdict(ctx, FERRY_ACTION_FRAGMENT, XDP_PASS);
}

/* An ICMP error quoting a UDP datagram that a service's VIP sent (a reply: the error goes to the
 * backend that sent it) or that the gateway sent to a backend (a request: the error goes to the
 * client). Errors to the gateway's own addresses about anything else (the health checker's) and
 * every other ICMP message stay the kernel's. `quoted` points at the quoted IP header. */
static __always_inline int classify_icmp_error(struct xdp_md *ctx, void *quoted, void *data_end,
                                               __u8 family, const __u8 *daddr, __u32 addr_len) {
  struct ferry_endpoint_key qsrc = {.family = family, .proto = IPPROTO_UDP};
  struct ferry_endpoint_key qdst = {.family = family, .proto = IPPROTO_UDP};
  struct udphdr *udp;
  if (family == AF_INET) {
    struct iphdr *ip = quoted;
    if ((void *)(ip + 1) > data_end) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
    if (ip->protocol != IPPROTO_UDP || ip->ihl < 5) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
    if (ip->frag_off & bpf_htons(0x1fff)) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
    udp = quoted + (ip->ihl & 0xf) * 4;
    __builtin_memcpy(qsrc.addr, &ip->saddr, 4);
    __builtin_memcpy(qdst.addr, &ip->daddr, 4);
  } else {
    struct ipv6hdr *ip6 = quoted;
    if ((void *)(ip6 + 1) > data_end) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
    udp = (void *)(ip6 + 1);
    if (ip6->nexthdr == 44) {
      struct frag_hdr6 *frag = (void *)(ip6 + 1);
      if ((void *)(frag + 1) > data_end) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
      if (frag->nexthdr != IPPROTO_UDP || (frag->frag_off & bpf_htons(0xfff8))) {
        return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
      }
      udp = (void *)(frag + 1);
    } else if (ip6->nexthdr != IPPROTO_UDP) {
      return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
    }
    __builtin_memcpy(qsrc.addr, &ip6->saddr, 16);
    __builtin_memcpy(qdst.addr, &ip6->daddr, 16);
  }
  if ((void *)udp + 4 > data_end) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
  qsrc.port = udp->source;
  qdst.port = udp->dest;
  struct ferry_service_value *svc = bpf_map_lookup_elem(&services, &qsrc);
  if (svc) return steer(ctx, svc->service_id, FERRY_DIRECTION_IN, FERRY_META_NONE, 0);
  if (is_local(family, daddr, addr_len)) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
  svc = bpf_map_lookup_elem(&backends, &qdst);
  if (svc) return steer(ctx, svc->service_id, FERRY_DIRECTION_OUT, FERRY_META_NONE, 0);
  return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
}

static __always_inline int handle_l4(struct xdp_md *ctx, void *l4, void *data_end, __u8 proto,
                                     __u8 family, const __u8 *saddr, const __u8 *daddr,
                                     __u32 addr_len, __u32 route_protocols, __u32 pass_action) {
  struct ferry_endpoint_key dst = {.family = family, .proto = proto};
  struct ferry_endpoint_key src = {.family = family, .proto = proto};
  if (proto == IPPROTO_UDP) {
    struct udphdr *udp = l4;
    if ((void *)(udp + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
    if (bpf_ntohs(udp->len) < sizeof(*udp)) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
    dst.port = udp->dest;
    src.port = udp->source;
    if (addr_len == 4) {
      __builtin_memcpy(dst.addr, daddr, 4);
      __builtin_memcpy(src.addr, saddr, 4);
    } else {
      __builtin_memcpy(dst.addr, daddr, 16);
      __builtin_memcpy(src.addr, saddr, 16);
    }
    return classify_udp(ctx, &dst, &src, route_protocols & FERRY_ROUTE_UDP, pass_action);
  }
  if ((proto == IPPROTO_ICMP && family == AF_INET) ||
      (proto == IPPROTO_ICMPV6 && family == AF_INET6)) {
    struct icmp_head *icmp = l4;
    if ((void *)(icmp + 1) > data_end) return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
    int error = family == AF_INET ? icmp->type == ICMP4_DEST_UNREACH ||
                                        icmp->type == ICMP4_TIME_EXCEEDED ||
                                        icmp->type == ICMP4_PARAMETER_PROBLEM
                                  : icmp->type >= ICMP6_DEST_UNREACH &&
                                        icmp->type <= ICMP6_PARAMETER_PROBLEM;
    if (error) return classify_icmp_error(ctx, icmp + 1, data_end, family, daddr, addr_len);
  }
  if (proto == IPPROTO_TCP) {
    struct tcphdr *tcp = l4;
    if ((void *)(tcp + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
    if (tcp->doff < 5) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
    /* An encapsulating service's TCP is balanced per packet by the workers. */
    dst.port = tcp->dest;
    copy_addr(dst.addr, daddr, addr_len);
    struct ferry_service_value *svc = bpf_map_lookup_elem(&services, &dst);
    if (svc && (svc->flags & FERRY_SERVICE_ENCAP)) {
      return steer(ctx, svc->service_id, FERRY_DIRECTION_IN, FERRY_META_TO_SERVICE, 0);
    }
  }
  /* Other TCP is proxied by the kernel + io_uring; ICMP and the rest belong to the kernel. */
  return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
}

static __always_inline int handle_ipv4(struct xdp_md *ctx, void *l3, void *data_end) {
  struct iphdr *ip = l3;
  if ((void *)(ip + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
  __u32 ihl_bytes = ip->ihl * 4;
  if (ip->version != 4 || ihl_bytes < sizeof(*ip)) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
  if (l3 + ihl_bytes > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
  __u16 total = bpf_ntohs(ip->tot_len);
  if (total < ihl_bytes || l3 + total > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);

  struct ferry_lpm4_key src_key = {.prefixlen = 32};
  __builtin_memcpy(src_key.addr, &ip->saddr, 4);
  if (bpf_map_lookup_elem(&drop4, &src_key)) return verdict(ctx, FERRY_ACTION_DROP, XDP_DROP);

  struct ferry_lpm4_key dst_key = {.prefixlen = 32};
  __builtin_memcpy(dst_key.addr, &ip->daddr, 4);
  struct ferry_route_value *route = bpf_map_lookup_elem(&routes4, &dst_key);
  if (ip->frag_off & bpf_htons(0x3fff)) {
    /* A first fragment (offset 0) holds the UDP header and is classified as a datagram. */
    if (ip->protocol != IPPROTO_UDP) return verdict(ctx, FERRY_ACTION_FRAGMENT, XDP_PASS);
    if (ip->frag_off & bpf_htons(0x1fff)) {
      return classify_udp_tail(ctx, AF_INET, (__u8 *)&ip->saddr, (__u8 *)&ip->daddr, 4,
                               route ? route->protocols & FERRY_ROUTE_UDP : 0);
    }
    /* Too short for its UDP header: the worker counts it and drops it. */
    if (l3 + ihl_bytes + sizeof(struct udphdr) > data_end) {
      return classify_udp_tail(ctx, AF_INET, (__u8 *)&ip->saddr, (__u8 *)&ip->daddr, 4,
                               route ? route->protocols & FERRY_ROUTE_UDP : 0);
    }
  }
  /* A first fragment not ours is counted as a fragment, as the later ones are. */
  __u32 pass_action = (ip->frag_off & bpf_htons(0x2000)) ? FERRY_ACTION_FRAGMENT : FERRY_ACTION_PASS;
  return handle_l4(ctx, l3 + ihl_bytes, data_end, ip->protocol, AF_INET, (__u8 *)&ip->saddr,
                   (__u8 *)&ip->daddr, 4, route ? route->protocols : 0, pass_action);
}

static __always_inline int handle_ipv6(struct xdp_md *ctx, void *l3, void *data_end) {
  struct ipv6hdr *ip6 = l3;
  if ((void *)(ip6 + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
  if (ip6->version != 6) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
  if ((void *)(ip6 + 1) + bpf_ntohs(ip6->payload_len) > data_end) {
    return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
  }

  struct ferry_lpm6_key src_key = {.prefixlen = 128};
  __builtin_memcpy(src_key.addr, &ip6->saddr, 16);
  if (bpf_map_lookup_elem(&drop6, &src_key)) return verdict(ctx, FERRY_ACTION_DROP, XDP_DROP);

  __u8 next = ip6->nexthdr;
  void *l4 = ip6 + 1;
  __u32 pass_action = FERRY_ACTION_PASS;
  struct ferry_lpm6_key dst_key = {.prefixlen = 128};
  __builtin_memcpy(dst_key.addr, &ip6->daddr, 16);
  struct ferry_route_value *route = bpf_map_lookup_elem(&routes6, &dst_key);
  if (next == 44) {
    /* A fragment header right after the fixed one; other extension headers are the kernel's. */
    struct frag_hdr6 *frag = l4;
    if ((void *)(frag + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
    if (frag->nexthdr != IPPROTO_UDP) return verdict(ctx, FERRY_ACTION_FRAGMENT, XDP_PASS);
    l4 = frag + 1;
    if ((frag->frag_off & bpf_htons(0xfff8)) || l4 + sizeof(struct udphdr) > data_end) {
      return classify_udp_tail(ctx, AF_INET6, (__u8 *)&ip6->saddr, (__u8 *)&ip6->daddr, 16,
                               route ? route->protocols & FERRY_ROUTE_UDP : 0);
    }
    next = IPPROTO_UDP;
    pass_action = FERRY_ACTION_FRAGMENT;
  }
  if (next != IPPROTO_UDP && next != IPPROTO_TCP && next != IPPROTO_ICMPV6) {
    return verdict(ctx, FERRY_ACTION_FRAGMENT, XDP_PASS);  /* extension headers: the kernel's */
  }
  return handle_l4(ctx, l4, data_end, next, AF_INET6, (__u8 *)&ip6->saddr,
                   (__u8 *)&ip6->daddr, 16, route ? route->protocols : 0, pass_action);
}

SEC("xdp")
int ferry_xdp(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data;
  void *data_end = (void *)(long)ctx->data_end;
  struct ethhdr *eth = data;
  if ((void *)(eth + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);

  void *cursor = eth + 1;
  __be16 proto = eth->h_proto;
#pragma unroll
  for (int i = 0; i < VLAN_MAX_DEPTH; i++) {
    if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD)) break;
    struct vlan_hdr *vlan = cursor;
    if ((void *)(vlan + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
    proto = vlan->encapsulated_proto;
    cursor = vlan + 1;
  }
  if (proto == bpf_htons(ETH_P_IP)) return handle_ipv4(ctx, cursor, data_end);
  if (proto == bpf_htons(ETH_P_IPV6)) return handle_ipv6(ctx, cursor, data_end);
  /* ARP, a third VLAN tag, and every other ethertype: the kernel's business. */
  return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
