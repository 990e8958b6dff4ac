// Naming the interfaces of ferryd's network namespace, for errors about one that is not there.
#pragma once

#include <string>
#include <vector>

namespace ferry::net {

// The interfaces of the calling thread's network namespace, in ifindex order.
std::vector<std::string> interface_names();

// "NAME: no such interface in this network namespace (it has: lo, eth0, ...)": the message for a
// configured interface ferryd cannot find. The namespace is the common cause (a container, a
// unit with PrivateNetwork=, `ip netns exec`), so the message lists what it does have.
std::string no_such_interface(const std::string& name);

}  // namespace ferry::net
