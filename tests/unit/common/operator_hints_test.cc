// The facts errors name for the operator: the interfaces of this network namespace, and the
// process holding a TCP port.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "lib/common/interface_names.hh"
#include "lib/common/port_owner.hh"
#include "lib/common/unique_fd.hh"

namespace ferry::net {
namespace {

TEST(InterfaceNames, AMissingInterfaceIsNamedWithTheNamespacesOwn) {
  std::vector<std::string> names = interface_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "lo") << "ifindex 1 of every network namespace";
  std::string message = no_such_interface("nope0");
  EXPECT_EQ(message.rfind("nope0: no such interface in this network namespace (it has: lo", 0), 0u)
      << message;
}

TEST(PortOwner, NamesTheProcessListeningOnAnAddressOrTheWildcard) {
  for (const char* bind_to : {"127.0.0.1", "0.0.0.0"}) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ASSERT_EQ(inet_pton(AF_INET, bind_to, &a.sin_addr), 1);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(::listen(fd.get(), 1), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    Endpoint at = *Endpoint::parse("127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
    std::ifstream comm("/proc/self/comm");
    std::string name;
    std::getline(comm, name);
    EXPECT_EQ(tcp_listener_of(at), name + ", pid " + std::to_string(getpid())) << bind_to;
  }
}

TEST(PortOwner, NobodyListeningIsEmpty) {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)),
            0);  // bound, not listening
  socklen_t len = sizeof(a);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  EXPECT_EQ(tcp_listener_of(*Endpoint::parse("[::1]:" + std::to_string(ntohs(a.sin6_port)))), "");
  ASSERT_EQ(::listen(fd.get(), 1), 0);
  EXPECT_NE(tcp_listener_of(*Endpoint::parse("[::1]:" + std::to_string(ntohs(a.sin6_port)))), "");
}

}  // namespace
}  // namespace ferry::net
