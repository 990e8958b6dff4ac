/* The one contract between bpf/ferry.bpf.c and user space: map keys, values and counter slots.
 * Addresses and ports are in network byte order everywhere, as they are on the wire. */
#ifndef FERRY_BPF_SHARED_H
#define FERRY_BPF_SHARED_H

#include <linux/types.h>

#ifdef __cplusplus
namespace ferry::bpf {
#endif

#define FERRY_MAX_SERVICES 1024
#define FERRY_MAX_BACKENDS 65536
/* backends map values: the backend's index in its service's configured backends, in the upper 16
 * bits of `flags`, for the frame metadata of its replies. */
#define FERRY_BACKEND_INDEX_SHIFT 16
/* The gateway's own addresses (local_addrs): a backend's reply to one of them answers a local
 * socket, a health check, and goes to the kernel. */
#define FERRY_MAX_LOCAL_ADDRS 1024
/* A backends entry whose replies may also answer a local socket (a udp or dns health check of
 * that very address and port): only for these is local_addrs looked up, so unchecked backends'
 * replies cost nothing more. */
#define FERRY_BACKEND_LOCAL_REPLIES 1u
/* A services entry of an encapsulating service (forwarding ipip or gue, direct server return):
 * its TCP is steered to the workers too, which balance it per packet. Without it a TCP VIP is the
 * kernel's (the io_uring proxy's listener). */
#define FERRY_SERVICE_ENCAP 2u
/* udp_hosts: (family, IPPROTO_UDP, port 0, address) -> FERRY_HOST_* flags, for the fragments of
 * a datagram after its first, which carry no ports: one to a UDP service's VIP, or from one of
 * their backends, goes to the worker that translates the whole datagram. */
#define FERRY_MAX_UDP_HOSTS (FERRY_MAX_SERVICES + FERRY_MAX_BACKENDS)
#define FERRY_HOST_VIP 1u
#define FERRY_HOST_BACKEND 2u
#define FERRY_MAX_QUEUES 256
/* The program runs on several interfaces, and an AF_XDP socket is bound to one (interface, queue):
 * user space gives each interface a slot (ifslots: ifindex -> slot) and the XSKMAP is keyed by
 * slot * FERRY_MAX_QUEUES + rx queue, so a frame only ever goes to a socket of its own device. */
#define FERRY_MAX_INTERFACES 16
#define FERRY_XSKMAP_ENTRIES (FERRY_MAX_INTERFACES * FERRY_MAX_QUEUES)
#define FERRY_MAX_ROUTES 4096
#define FERRY_MAX_DROP_PREFIXES 65536

/* Per-CPU counter slots of the `action_counters` array map, one per verdict. */
enum ferry_action {
  FERRY_ACTION_PASS = 0,      /* not ours: handed to the kernel stack */
  FERRY_ACTION_DROP = 1,      /* source matched a drop prefix */
  FERRY_ACTION_REDIRECT = 2,  /* steered into the queue's AF_XDP socket */
  FERRY_ACTION_MALFORMED = 3, /* truncated or inconsistent headers; passed to the kernel */
  FERRY_ACTION_NO_SOCKET = 4, /* ours, but no AF_XDP socket on that (interface, queue): to the kernel */
  FERRY_ACTION_FRAGMENT = 5,  /* a fragment or IPv6 extension header not ours: to the kernel */
  FERRY_ACTION_COUNT = 6,
};

/* Slots of the per-CPU `service_counters` array: each service counts the frames to its VIP
 * (in) apart from its backends' replies (out). */
enum ferry_direction {
  FERRY_DIRECTION_IN = 0,  /* to a service's (vip, port, proto) */
  FERRY_DIRECTION_OUT = 1, /* from one of its backends: a reply */
  FERRY_DIRECTION_COUNT = 2,
};
#define FERRY_SERVICE_COUNTER_SLOTS (FERRY_MAX_SERVICES * FERRY_DIRECTION_COUNT)

static inline __u32 ferry_service_slot(__u32 service_id, __u32 direction) {
  return service_id * FERRY_DIRECTION_COUNT + direction;
}

/* The XSKMAP key of (interface slot, rx queue). */
static inline __u32 ferry_xsk_key(__u32 slot, __u32 queue) { return slot * FERRY_MAX_QUEUES + queue; }

struct ferry_action_counter {
  __u64 packets;
  __u64 bytes;
};

/* services: (vip, port, proto) -> service; backends: (backend ip, port, proto) -> service, for
 * replies that come back through the gateway. */
struct ferry_endpoint_key {
  __u8 family; /* AF_INET (2) or AF_INET6 (10) */
  __u8 proto;  /* IPPROTO_UDP (17) or IPPROTO_TCP (6) */
  __be16 port;
  __u8 addr[16]; /* IPv4 in the first 4 bytes, the rest zero */
};

struct ferry_service_value {
  __u32 service_id; /* < FERRY_MAX_SERVICES: its service_counters are ferry_service_slot() */
  __u32 flags;      /* services map: FERRY_SERVICE_*; backends map: FERRY_BACKEND_* */
};

/* What the program decided for a frame it steers, written in the XDP metadata area just before
 * the packet (bpf_xdp_adjust_meta), which AF_XDP copies into the UMEM with the frame in copy and
 * zero-copy mode: the worker takes the service from it instead of matching the frame again. A hint,
 * not a contract: the worker checks it against the frame and its own tables (a reload may have
 * changed either side) and matches as before when it does not hold. */
#define FERRY_META_MAGIC 0x66727931u /* "fry1": this layout */
enum ferry_meta_kind {
  FERRY_META_NONE = 0,         /* no decision to pass (fragment tails, ICMP errors, routed) */
  FERRY_META_TO_SERVICE = 1,   /* to the service's (vip, port, proto) */
  FERRY_META_FROM_BACKEND = 2, /* from backend `backend` of the service: a reply */
};
struct ferry_frame_meta {
  __u32 magic;      /* FERRY_META_MAGIC */
  __u16 service_id; /* the services map's id (ferry_service_value.service_id) */
  __u16 backend;    /* FERRY_META_FROM_BACKEND: index in the service's configured backends */
  __u32 kind;       /* enum ferry_meta_kind */
};

/* LPM trie keys: prefixlen first, as the kernel requires. */
struct ferry_lpm4_key {
  __u32 prefixlen;
  __u8 addr[4];
};

struct ferry_lpm6_key {
  __u32 prefixlen;
  __u8 addr[16];
};

#define FERRY_ROUTE_UDP 0x1
#define FERRY_ROUTE_TCP 0x2

struct ferry_route_value {
  __u32 route_id;
  __u32 egress_ifindex;
  __u32 protocols; /* FERRY_ROUTE_* */
  __u32 reserved;
};

#ifdef __cplusplus
}  // namespace ferry::bpf
#endif
#endif
