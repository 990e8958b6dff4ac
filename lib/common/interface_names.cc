// Interface names of the current network namespace.
#include "lib/common/interface_names.hh"

#include <net/if.h>

namespace ferry::net {

std::vector<std::string> interface_names() {
  std::vector<std::string> names;
  if (struct if_nameindex* list = if_nameindex()) {
    for (struct if_nameindex* i = list; i->if_index != 0; ++i) names.emplace_back(i->if_name);
    if_freenameindex(list);
  }
  return names;
}

std::string no_such_interface(const std::string& name) {
  std::string have;
  for (const std::string& n : interface_names()) have += (have.empty() ? "" : ", ") + n;
  return name + ": no such interface in this network namespace (it has: " +
         (have.empty() ? "none" : have) + ")";
}

}  // namespace ferry::net
