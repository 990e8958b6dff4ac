/* The one contract between bpf/ferry_decap.bpf.c (a direct-server-return backend's decapsulation
 * program) and ferry-decap, its loader: map keys, values and counter slots. */
#ifndef FERRY_DECAP_SHARED_H
#define FERRY_DECAP_SHARED_H

#include <linux/types.h>

#ifdef __cplusplus
namespace ferry::bpf {
#endif

/* Slots of the per-CPU `decap_counters` array. Every slot counts frames and their bytes as they
 * arrived (outer headers included). The first six are the tunnel forms stripped, named
 * inner-in-outer; then frames that are not ferry's tunnel (passed untouched); then the tunnel
 * frames refused (dropped), one slot per reason. */
enum ferry_decap_counter_slot {
  FERRY_DECAP_IPIP4_IN_4 = 0, /* outer IPv4, protocol 4: inner IPv4 */
  FERRY_DECAP_IPIP6_IN_4 = 1, /* outer IPv4, protocol 41: inner IPv6 */
  FERRY_DECAP_IPIP4_IN_6 = 2, /* outer IPv6, next header 4: inner IPv4 */
  FERRY_DECAP_IPIP6_IN_6 = 3, /* outer IPv6, next header 41: inner IPv6 */
  FERRY_DECAP_GUE_IN_4 = 4,   /* GUE variant 1 over UDP over IPv4 (either inner family) */
  FERRY_DECAP_GUE_IN_6 = 5,   /* GUE variant 1 over UDP over IPv6 (either inner family) */
  FERRY_DECAP_PASSED = 6,     /* not a tunnel to strip: handed to the stack untouched */
  FERRY_DECAP_REFUSED_FIRST = 7,
  /* The outer IPv4 total length, IPv6 payload length or UDP length runs past the frame or
   * disagrees with the others. */
  FERRY_DECAP_REFUSED_OUTER_TRUNCATED = 7,
  FERRY_DECAP_REFUSED_OUTER_OPTIONS = 8,    /* outer IPv4 header not 20 bytes (IHL != 5) */
  FERRY_DECAP_REFUSED_OUTER_FRAGMENT = 9,   /* outer IPv4 fragment or IPv6 Fragment header */
  FERRY_DECAP_REFUSED_NOT_LOCAL = 10,       /* outer destination not one of this host's addresses */
  FERRY_DECAP_REFUSED_INNER_TRUNCATED = 11, /* outer payload shorter than the inner IP header */
  /* The inner packet's own length (IPv4 total length, IHL; IPv6 payload length) is not the outer
   * payload's. */
  FERRY_DECAP_REFUSED_INNER_LENGTH = 12,
  FERRY_DECAP_REFUSED_VERSION = 13,     /* IPIP: inner IP version is not the outer protocol's */
  FERRY_DECAP_REFUSED_GUE_VARIANT = 14, /* GUE port: payload is not variant 1 IPv4 or IPv6 */
  FERRY_DECAP_REFUSED_ADJUST = 15,      /* the kernel refused to move the frame's head or tail */
  FERRY_DECAP_COUNTER_COUNT = 16,
};

struct ferry_decap_counter {
  __u64 packets;
  __u64 bytes;
};

/* How ferry-decap attached the program; kept in the config map for `ferry-decap status`. */
enum ferry_decap_mode {
  FERRY_DECAP_MODE_UNSET = 0,
  FERRY_DECAP_MODE_NATIVE = 1,
  FERRY_DECAP_MODE_GENERIC = 2,
};

/* The single entry (key 0) of the `decap_config` array. */
struct ferry_decap_config {
  __be16 gue_port; /* UDP destination port of GUE, network byte order; 0: no GUE */
  __u8 mode;       /* enum ferry_decap_mode, written by the loader, unread by the program */
  __u8 reserved;
  __u32 ifindex; /* the interface the loader attached to, for status */
};

/* `local_addrs` keys: the host's own addresses, filled by the loader. A tunnel frame is stripped
 * only when its outer destination is one of them. */
#define FERRY_DECAP_MAX_LOCAL_ADDRS 1024
struct ferry_decap_addr_key {
  __u32 family;  /* AF_INET (2) or AF_INET6 (10) */
  __u8 addr[16]; /* IPv4 in the first 4 bytes, the rest zero */
};

#ifdef __cplusplus
}  // namespace ferry::bpf
#endif

#endif
