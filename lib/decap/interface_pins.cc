// One attachment's pins: PIN_DIR/IFACE/ with the bpf_link and the program's maps.
#include "lib/decap/interface_pins.hh"

#include <bpf/bpf.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "lib/decap/decap_program.hh"

namespace ferry::decap {

void check_interface_name(const std::string& ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ || ifname == "." || ifname == ".." ||
      ifname.find_first_of("/ \t\n:") != std::string::npos) {
    throw std::runtime_error("\"" + ifname + "\" is not an interface name");
  }
}

InterfacePins::InterfacePins(const std::string& pin_dir, const std::string& ifname)
    : dir_(pin_dir + "/" + ifname) {
  check_interface_name(ifname);
}

bool InterfacePins::exists() const {
  struct stat st {};
  return ::stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool InterfacePins::has_link() const {
  return ::access(path(link_pin).c_str(), F_OK) == 0;
}

UniqueFd InterfacePins::open(const std::string& name) const {
  int fd = bpf_obj_get(path(name).c_str());
  if (fd < 0) {
    throw std::runtime_error(path(name) + ": opening the pin failed: " + std::strerror(errno));
  }
  return UniqueFd(fd);
}

std::map<std::string, UniqueFd> InterfacePins::open_maps() const {
  std::map<std::string, UniqueFd> maps;
  for (const char* name : map_names) maps.emplace(name, open(name));
  return maps;
}

void InterfacePins::remove() const {
  // The link first: the program leaves the interface before its maps lose their names.
  ::unlink(path(link_pin).c_str());
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

PinTransaction::PinTransaction(const InterfacePins& pins) : pins_(pins) {
  if (::mkdir(pins.dir().c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error(pins.dir() +
                             ": creating the pin directory failed: " + std::strerror(errno));
  }
}

PinTransaction::~PinTransaction() {
  if (!committed_) pins_.remove();
}

void PinTransaction::pin(int fd, const std::string& name) {
  if (bpf_obj_pin(fd, pins_.path(name).c_str()) != 0) {
    throw std::runtime_error(pins_.path(name) + ": pinning failed: " + std::strerror(errno));
  }
}

}  // namespace ferry::decap
