/* The one contract between bpf/ferry_hc.bpf.c (the TC egress program that puts ferryd's health
 * checks of encapsulating services into their backend's tunnel) and lib/tunnel_check, its
 * loader: the mark range, the map values and the counter slots. */
#ifndef FERRY_HC_SHARED_H
#define FERRY_HC_SHARED_H

#include <linux/types.h>

#ifdef __cplusplus
namespace ferry::bpf {
#endif

/* SO_MARK values of health-check sockets that go through a tunnel: FERRY_HC_MARK_BASE | n, n in
 * 1..FERRY_HC_MAX_TUNNELS, each n naming one (backend address, ipip or gue) pair. The program
 * takes only packets whose mark is in this range; the rest of the host's traffic passes. */
#define FERRY_HC_MARK_BASE 0x66650000u /* "fe" in the high half */
#define FERRY_HC_MARK_MASK 0xffff0000u
#define FERRY_HC_MAX_TUNNELS 4096

enum ferry_hc_kind {
  FERRY_HC_IPIP = 1, /* outer IP, protocol / next header 4 or 41 */
  FERRY_HC_GUE = 2,  /* outer IP + UDP to gue_port, the inner packet right after (variant 1) */
};

/* `hc_tunnels` values, keyed by the mark (__u32). */
struct ferry_hc_tunnel {
  __u32 family; /* of the outer header: AF_INET (2) or AF_INET6 (10) */
  __u8 kind;    /* enum ferry_hc_kind */
  __u8 reserved;
  __be16 gue_port;      /* GUE: UDP destination port, network byte order */
  __u8 source[16];      /* outer source: xdp.encap.source (IPv4, first 4 bytes) or source6 */
  __u8 destination[16]; /* the backend's address */
};

/* The single entry (key 0) of `hc_config`: the interfaces the encapsulated packet may leave by
 * (the ones the program is attached to), tried after the one it is on, 0-terminated. */
#define FERRY_HC_MAX_INTERFACES 8
struct ferry_hc_config {
  __u32 ifindexes[FERRY_HC_MAX_INTERFACES];
};

/* Slots of the per-CPU `hc_counters` array (packets and bytes as they left the socket): every
 * packet counts once in the first FERRY_HC_RESULT_COUNT, a sent one once more in a routed slot. */
enum ferry_hc_counter_slot {
  FERRY_HC_SENT_IPIP4 = 0, /* encapsulated and redirected: outer IPv4, IPIP */
  FERRY_HC_SENT_IPIP6 = 1,
  FERRY_HC_SENT_GUE4 = 2,
  FERRY_HC_SENT_GUE6 = 3,
  FERRY_HC_DROP_FIRST = 4,
  FERRY_HC_DROP_NO_TUNNEL = 4, /* a mark in the range that `hc_tunnels` does not hold */
  FERRY_HC_DROP_NOT_IP = 5,    /* not a TCP or UDP packet in IPv4 without options or IPv6 */
  FERRY_HC_DROP_GSO = 6,       /* a GSO packet to GUE over IPv6 (its checksum needs one segment) */
  FERRY_HC_DROP_ADJUST = 7,    /* the kernel refused bpf_skb_adjust_room / store */
  FERRY_HC_DROP_NO_ROUTE = 8,  /* no route to the backend out of an attached interface */
  FERRY_HC_RESULT_COUNT = 9,
  /* How a sent packet found its way, counted beside its sent_* slot: bpf_fib_lookup's next hop
   * (forwarding on), or the kernel's route out of the interface it was on (forwarding off). */
  FERRY_HC_ROUTED_FIB = 9,
  FERRY_HC_ROUTED_INTERFACE = 10,
  FERRY_HC_COUNTER_COUNT = 11,
};

struct ferry_hc_counter {
  __u64 packets;
  __u64 bytes;
};

#ifdef __cplusplus
}  // namespace ferry::bpf
#endif

#endif
