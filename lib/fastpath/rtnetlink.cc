// rtnetlink link/route/neighbour parsing, dumps, notifications, neighbour queries and the NTF_USE
// resolution requests.
#include "lib/fastpath/rtnetlink.hh"

#include <fcntl.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

namespace ferry::fastpath {
namespace {

// Walks the rtattrs after a fixed header of `fixed_bytes`.
template <typename Visit>
void for_each_attribute(const nlmsghdr* message, std::size_t fixed_bytes, Visit&& visit) {
  const auto* start = reinterpret_cast<const std::uint8_t*>(NLMSG_DATA(message));
  if (message->nlmsg_len < NLMSG_LENGTH(fixed_bytes)) return;
  int remaining = static_cast<int>(message->nlmsg_len - NLMSG_LENGTH(fixed_bytes));
  const auto* attr = reinterpret_cast<const rtattr*>(start + NLMSG_ALIGN(fixed_bytes));
  for (; RTA_OK(attr, remaining); attr = RTA_NEXT(attr, remaining)) visit(attr);
}

std::optional<net::IpAddress> address_of(const rtattr* attr, std::uint8_t family) {
  std::size_t len = RTA_PAYLOAD(attr);
  net::IpAddress a;
  if (family == AF_INET && len == 4) {
    a.family = AF_INET;
  } else if (family == AF_INET6 && len == 16) {
    a.family = AF_INET6;
  } else {
    return std::nullopt;
  }
  std::memcpy(a.bytes.data(), RTA_DATA(attr), len);
  return a;
}

std::uint32_t u32_of(const rtattr* attr) {
  std::uint32_t v = 0;
  if (RTA_PAYLOAD(attr) >= sizeof(v)) std::memcpy(&v, RTA_DATA(attr), sizeof(v));
  return v;
}

// The errno of an NLMSG_ERROR answer (0: an acknowledgement).
int error_of(const nlmsghdr* h) {
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return EBADMSG;
  return -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
}

}  // namespace

std::optional<LinkMessage> parse_link(const nlmsghdr* message) {
  if (message->nlmsg_type != RTM_NEWLINK && message->nlmsg_type != RTM_DELLINK) return {};
  if (message->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) return {};
  const auto* info = static_cast<const ifinfomsg*>(NLMSG_DATA(message));
  LinkMessage out;
  out.deleted = message->nlmsg_type == RTM_DELLINK;
  out.ifindex = info->ifi_index;
  out.flags = info->ifi_flags;
  for_each_attribute(message, sizeof(ifinfomsg), [&](const rtattr* attr) {
    if (attr->rta_type != IFLA_IFNAME) return;
    // NUL-terminated by the kernel; take at most the payload either way.
    const auto* text = static_cast<const char*>(RTA_DATA(attr));
    out.name.assign(text, ::strnlen(text, RTA_PAYLOAD(attr)));
  });
  // Every link message names its interface; one that does not is nothing to match on.
  if (out.ifindex <= 0 || out.name.empty()) return {};
  return out;
}

std::optional<NeighbourMessage> parse_neighbour(const nlmsghdr* message) {
  if (message->nlmsg_type != RTM_NEWNEIGH && message->nlmsg_type != RTM_DELNEIGH) return {};
  if (message->nlmsg_len < NLMSG_LENGTH(sizeof(ndmsg))) return {};
  const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(message));
  if (nd->ndm_family != AF_INET && nd->ndm_family != AF_INET6) return {};
  NeighbourMessage out;
  out.deleted = message->nlmsg_type == RTM_DELNEIGH;
  out.ifindex = nd->ndm_ifindex;
  out.state = nd->ndm_state;
  bool have_address = false;
  for_each_attribute(message, sizeof(ndmsg), [&](const rtattr* attr) {
    if (attr->rta_type == NDA_DST) {
      if (auto a = address_of(attr, nd->ndm_family)) {
        out.address = *a;
        have_address = true;
      }
    } else if (attr->rta_type == NDA_LLADDR && RTA_PAYLOAD(attr) == 6) {
      packet::MacAddress mac;
      std::memcpy(mac.data(), RTA_DATA(attr), mac.size());
      out.mac = mac;
    }
  });
  if (!have_address) return {};
  return out;
}

std::optional<RouteMessage> parse_route(const nlmsghdr* message) {
  if (message->nlmsg_type != RTM_NEWROUTE && message->nlmsg_type != RTM_DELROUTE) return {};
  if (message->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return {};
  const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(message));
  if (rt->rtm_family != AF_INET && rt->rtm_family != AF_INET6) return {};
  RouteMessage out;
  out.deleted = message->nlmsg_type == RTM_DELROUTE;
  out.table = rt->rtm_table;
  out.type = rt->rtm_type;
  out.protocol = rt->rtm_protocol;
  out.flags = rt->rtm_flags;
  out.prefix.address.family = rt->rtm_family;
  out.prefix.length = rt->rtm_dst_len;
  if (out.prefix.length > out.prefix.address.max_prefix_len()) return {};
  for_each_attribute(message, sizeof(rtmsg), [&](const rtattr* attr) {
    switch (attr->rta_type) {
      case RTA_DST:
        if (auto a = address_of(attr, rt->rtm_family)) out.prefix.address = *a;
        break;
      case RTA_OIF:
        out.oif = static_cast<int>(u32_of(attr));
        break;
      case RTA_GATEWAY:
        out.gateway = address_of(attr, rt->rtm_family);
        break;
      case RTA_PRIORITY:
        out.metric = u32_of(attr);
        break;
      case RTA_TABLE:
        out.table = u32_of(attr);
        break;
      case RTA_MULTIPATH: {
        // The first next hop only: the workers do not spread one route over several.
        if (RTA_PAYLOAD(attr) < sizeof(rtnexthop)) break;
        const auto* nh = static_cast<const rtnexthop*>(RTA_DATA(attr));
        if (nh->rtnh_len < sizeof(rtnexthop) || nh->rtnh_len > RTA_PAYLOAD(attr)) break;
        out.oif = nh->rtnh_ifindex;
        int remaining = static_cast<int>(nh->rtnh_len - RTNH_LENGTH(0));
        for (const auto* a = static_cast<const rtattr*>(RTNH_DATA(nh)); RTA_OK(a, remaining);
             a = RTA_NEXT(a, remaining)) {
          if (a->rta_type == RTA_GATEWAY) out.gateway = address_of(a, rt->rtm_family);
        }
        break;
      }
      default:
        break;
    }
  });
  // Host bits of the destination are zero in the kernel's routes; keep Prefix's invariant anyway.
  for (int bit = out.prefix.length; bit < out.prefix.address.max_prefix_len(); ++bit) {
    out.prefix.address.bytes[bit / 8] &= static_cast<std::uint8_t>(~(0x80 >> (bit % 8)));
  }
  return out;
}

bool is_forwarding_route(const RouteMessage& route) {
  return route.table == RT_TABLE_MAIN && route.type == RTN_UNICAST &&
         (route.flags & RTM_F_CLONED) == 0 && route.oif != 0;
}

bool has_usable_mac(std::uint16_t nud_state) {
  return (nud_state &
          (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP)) != 0;
}

const char* nud_state_name(std::uint16_t nud_state) {
  static constexpr std::pair<std::uint16_t, const char*> kNames[] = {
      {NUD_INCOMPLETE, "INCOMPLETE"}, {NUD_REACHABLE, "REACHABLE"}, {NUD_STALE, "STALE"},
      {NUD_DELAY, "DELAY"},           {NUD_PROBE, "PROBE"},         {NUD_FAILED, "FAILED"},
      {NUD_NOARP, "NOARP"},           {NUD_PERMANENT, "PERMANENT"}};
  for (const auto& [bit, name] : kNames) {
    if (nud_state & bit) return name;
  }
  return "NONE";
}

void append_attribute(std::vector<std::uint8_t>& buf, std::uint16_t type, const void* data,
                      std::size_t size) {
  std::size_t at = buf.size();
  buf.resize(at + RTA_SPACE(size), 0);
  auto* attr = reinterpret_cast<rtattr*>(buf.data() + at);
  attr->rta_type = type;
  attr->rta_len = static_cast<unsigned short>(RTA_LENGTH(size));
  std::memcpy(RTA_DATA(attr), data, size);
}

namespace {

// One neighbour message for `address` on `ifindex` appended to `buf`.
void append_neighbour_message(std::vector<std::uint8_t>& buf, std::uint16_t type,
                              std::uint16_t flags, int ifindex, const net::IpAddress& address,
                              std::uint16_t state, std::uint8_t ndm_flags, std::uint32_t sequence) {
  std::size_t at = buf.size();
  buf.resize(at + NLMSG_ALIGN(NLMSG_LENGTH(sizeof(ndmsg))), 0);
  std::vector<std::uint8_t> body;
  append_attribute(body, NDA_DST, address.bytes.data(), address.is_v4() ? 4 : 16);
  buf.insert(buf.end(), body.begin(), body.end());
  auto* h = reinterpret_cast<nlmsghdr*>(buf.data() + at);
  h->nlmsg_len = static_cast<std::uint32_t>(buf.size() - at);
  h->nlmsg_type = type;
  h->nlmsg_flags = flags;
  h->nlmsg_seq = sequence;
  auto* nd = static_cast<ndmsg*>(NLMSG_DATA(h));
  nd->ndm_family = static_cast<std::uint8_t>(address.family);
  nd->ndm_ifindex = ifindex;
  nd->ndm_state = state;
  nd->ndm_flags = ndm_flags;
}

}  // namespace

std::vector<std::uint8_t> resolve_request(int ifindex, const net::IpAddress& address,
                                          std::uint32_t sequence) {
  std::vector<std::uint8_t> buf;
  // No NLM_F_ACK here: a caller that wants the answer uses transact(), which sets it.
  append_neighbour_message(buf, RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE, ifindex,
                           address, NUD_NONE, NTF_USE, sequence);
  return buf;
}

std::vector<std::uint8_t> restart_request(int ifindex, const net::IpAddress& address,
                                          std::uint32_t sequence) {
  std::vector<std::uint8_t> buf;
  append_neighbour_message(buf, RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_REPLACE, ifindex, address,
                           NUD_FAILED, 0, sequence);
  std::vector<std::uint8_t> use = resolve_request(ifindex, address, sequence);
  buf.insert(buf.end(), use.begin(), use.end());
  return buf;
}

std::vector<std::uint8_t> neighbour_query(int ifindex, const net::IpAddress& address,
                                          std::uint32_t sequence) {
  std::vector<std::uint8_t> buf;
  append_neighbour_message(buf, RTM_GETNEIGH, NLM_F_REQUEST, ifindex, address, 0, 0, sequence);
  return buf;
}

void for_each_message(std::span<const std::uint8_t> datagram,
                      const std::function<void(const nlmsghdr*)>& visit) {
  int remaining = static_cast<int>(datagram.size());
  for (const auto* h = reinterpret_cast<const nlmsghdr*>(datagram.data()); NLMSG_OK(h, remaining);
       h = NLMSG_NEXT(h, remaining)) {
    visit(h);
  }
}

RtnetlinkSocket::RtnetlinkSocket(std::uint32_t groups)
    : fd_(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE)) {
  if (!fd_) throw std::system_error(errno, std::generic_category(), "netlink socket");
  if (groups != 0) {
    int size = 1 << 20;  // bursts of neighbour updates must not overrun it
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  local.nl_groups = groups;
  if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    throw std::system_error(errno, std::generic_category(), "binding a netlink socket");
  }
}

int RtnetlinkSocket::duplicate_fd() const {
  int copy = ::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw std::system_error(errno, std::generic_category(), "dup netlink socket");
  return copy;
}

bool RtnetlinkSocket::send(std::span<const std::uint8_t> request) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  return ::sendto(fd_.get(), request.data(), request.size(), 0,
                  reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) >= 0;
}

// Reads the answer to request `sequence` until `take` returns true for one of its messages.
void RtnetlinkSocket::await_answer(std::uint32_t sequence, const char* what,
                                   const std::function<bool(const nlmsghdr*)>& take) {
  std::vector<std::uint8_t> buf(1 << 16);
  for (;;) {
    pollfd pfd{fd_.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 5000) <= 0)
      throw std::system_error(ETIMEDOUT, std::generic_category(), what);
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw std::system_error(errno, std::generic_category(), what);
    }
    bool done = false;
    for_each_message({buf.data(), static_cast<std::size_t>(n)}, [&](const nlmsghdr* h) {
      if (!done && h->nlmsg_seq == sequence) done = take(h);
    });
    if (done) return;
  }
}

int RtnetlinkSocket::transact(std::span<std::uint8_t> request,
                              const std::function<void(const nlmsghdr*)>& visit) {
  drain([](const nlmsghdr*) {});
  const std::uint32_t sequence = ++sequence_;
  int remaining = static_cast<int>(request.size());
  for (auto* h = reinterpret_cast<nlmsghdr*>(request.data()); NLMSG_OK(h, remaining);
       h = NLMSG_NEXT(h, remaining)) {
    h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    h->nlmsg_seq = sequence;
  }
  if (!send(request)) throw std::system_error(errno, std::generic_category(), "netlink request");
  // One acknowledgement per message; the first error is the answer (the kernel goes on with the
  // next message all the same).
  std::size_t acks_due = 0;
  remaining = static_cast<int>(request.size());
  for (auto* h = reinterpret_cast<nlmsghdr*>(request.data()); NLMSG_OK(h, remaining);
       h = NLMSG_NEXT(h, remaining)) {
    ++acks_due;
  }
  int answer = 0;
  await_answer(sequence, "netlink request", [&](const nlmsghdr* h) {
    if (h->nlmsg_type != NLMSG_ERROR) {
      if (visit) visit(h);
      return false;
    }
    if (answer == 0) answer = error_of(h);
    return --acks_due == 0;
  });
  return answer;
}

void RtnetlinkSocket::dump(std::uint16_t type, std::uint8_t family,
                           const std::function<void(const nlmsghdr*)>& visit) {
  // Whatever an earlier request left unread (errors of NTF_USE requests) is not this answer.
  drain([](const nlmsghdr*) {});
  struct {
    nlmsghdr header;
    rtgenmsg body;
  } request{};
  request.header.nlmsg_len = NLMSG_LENGTH(sizeof(rtgenmsg));
  request.header.nlmsg_type = type;
  request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  std::uint32_t sequence = request.header.nlmsg_seq = ++sequence_;
  request.body.rtgen_family = family;
  if (!send({reinterpret_cast<const std::uint8_t*>(&request), sizeof(request)})) {
    throw std::system_error(errno, std::generic_category(), "netlink dump request");
  }
  int error = 0;
  await_answer(sequence, "netlink dump", [&](const nlmsghdr* h) {
    if (h->nlmsg_type == NLMSG_DONE) return true;
    if (h->nlmsg_type == NLMSG_ERROR) {
      error = error_of(h);
      return true;
    }
    visit(h);
    return false;
  });
  if (error != 0) throw std::system_error(error, std::generic_category(), "netlink dump");
}

bool RtnetlinkSocket::drain(const std::function<void(const nlmsghdr*)>& visit) {
  std::vector<std::uint8_t> buf(1 << 16);
  bool complete = true;
  for (;;) {
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        complete = false;
        continue;
      }
      return complete;  // EAGAIN: nothing more queued
    }
    for_each_message({buf.data(), static_cast<std::size_t>(n)}, visit);
  }
}

}  // namespace ferry::fastpath
