/* ferry's XDP program: parses Ethernet (up to two VLAN tags), IPv4/IPv6 and UDP/TCP with
 * verifier-proof bounds checks; drops sources on the drop list; steers UDP for configured services,
 * their backends' replies and routed prefixes into the queue's AF_XDP socket; passes everything
 * else (TCP, ICMP, fragments, extension headers, malformed frames) to the kernel. */
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

/* Steers the frame into the AF_XDP socket of its (interface, rx queue); an interface without a
 * slot or an unbound queue falls back to the kernel. The service counter counts every match, by
 * direction; the action counter says whether it was redirected. */
static __always_inline int steer(struct xdp_md *ctx, __u32 service_id, __u32 direction) {
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
  int rc = bpf_redirect_map(&xsks, ferry_xsk_key(*slot, queue), XDP_PASS);
  if (rc != XDP_REDIRECT) return verdict(ctx, FERRY_ACTION_NO_SOCKET, XDP_PASS);
  count_into(&action_counters, FERRY_ACTION_REDIRECT, bytes);
  return XDP_REDIRECT;
}

/* UDP to a service VIP, from a backend (a reply), or to a routed prefix goes to AF_XDP. */
static __always_inline int classify_udp(struct xdp_md *ctx, struct ferry_endpoint_key *dst,
                                        struct ferry_endpoint_key *src, int routed) {
  struct ferry_service_value *svc = bpf_map_lookup_elem(&services, dst);
  if (svc) return steer(ctx, svc->service_id, FERRY_DIRECTION_IN);
  svc = bpf_map_lookup_elem(&backends, src);
  if (svc) {
    /* Replies go to clients; one addressed to the gateway itself answers a local socket (the
     * health checker's udp and dns checks), which the kernel must get. */
    if (svc->flags & FERRY_BACKEND_LOCAL_REPLIES) {
      struct ferry_endpoint_key local = {.family = dst->family};
      __builtin_memcpy(local.addr, dst->addr, sizeof(local.addr));
      if (bpf_map_lookup_elem(&local_addrs, &local)) {
        return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
      }
    }
    return steer(ctx, svc->service_id, FERRY_DIRECTION_OUT);
  }
  if (routed) return steer(ctx, FERRY_MAX_SERVICES, FERRY_DIRECTION_IN);
  return verdict(ctx, FERRY_ACTION_PASS, XDP_PASS);
}

static __always_inline int handle_l4(struct xdp_md *ctx, void *l4, void *data_end, __u8 proto,
                                     __u8 family, const __u8 *saddr, const __u8 *daddr,
                                     __u32 addr_len, __u32 route_protocols) {
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
    return classify_udp(ctx, &dst, &src, route_protocols & FERRY_ROUTE_UDP);
  }
  if (proto == IPPROTO_TCP) {
    struct tcphdr *tcp = l4;
    if ((void *)(tcp + 1) > data_end) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
    if (tcp->doff < 5) return verdict(ctx, FERRY_ACTION_MALFORMED, XDP_PASS);
  }
  /* TCP is proxied by the kernel + io_uring; ICMP and the rest belong to the kernel. */
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

  if (ip->frag_off & bpf_htons(0x3fff)) return verdict(ctx, FERRY_ACTION_FRAGMENT, XDP_PASS);

  struct ferry_lpm4_key dst_key = {.prefixlen = 32};
  __builtin_memcpy(dst_key.addr, &ip->daddr, 4);
  struct ferry_route_value *route = bpf_map_lookup_elem(&routes4, &dst_key);
  return handle_l4(ctx, l3 + ihl_bytes, data_end, ip->protocol, AF_INET, (__u8 *)&ip->saddr,
                   (__u8 *)&ip->daddr, 4, route ? route->protocols : 0);
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
  if (next != IPPROTO_UDP && next != IPPROTO_TCP && next != IPPROTO_ICMPV6) {
    return verdict(ctx, FERRY_ACTION_FRAGMENT, XDP_PASS);  /* extension headers: the kernel's */
  }
  struct ferry_lpm6_key dst_key = {.prefixlen = 128};
  __builtin_memcpy(dst_key.addr, &ip6->daddr, 16);
  struct ferry_route_value *route = bpf_map_lookup_elem(&routes6, &dst_key);
  return handle_l4(ctx, ip6 + 1, data_end, next, AF_INET6, (__u8 *)&ip6->saddr,
                   (__u8 *)&ip6->daddr, 16, route ? route->protocols : 0);
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
