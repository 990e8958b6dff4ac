// One attachment's pins: PIN_DIR/IFACE/ holds the bpf_link ("link") and the program's maps beside
// it, so the attachment outlives ferry-decap and status can read its counters.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/common/unique_fd.hh"

namespace ferry::decap {

inline constexpr const char* link_pin = "link";

// Throws std::runtime_error unless `ifname` can be an interface's name (and so a directory's).
void check_interface_name(const std::string& ifname);

class InterfacePins {
 public:
  InterfacePins(const std::string& pin_dir, const std::string& ifname);
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  bool exists() const;
  bool has_link() const;
  // An fd of the object pinned as `name`. Throws std::runtime_error naming the pin.
  UniqueFd open(const std::string& name) const;
  // The pinned maps by name, for DecapProgram to reuse.
  std::map<std::string, UniqueFd> open_maps() const;
  // Unlinks every pin and the directory; what is left of them is not an error.
  void remove() const;

 private:
  std::string dir_;
};

// Pins made for a new attachment, removed again unless commit() is called: a failed attach
// leaves no half-made directory behind.
class PinTransaction {
 public:
  explicit PinTransaction(const InterfacePins& pins);
  ~PinTransaction();
  PinTransaction(const PinTransaction&) = delete;
  PinTransaction& operator=(const PinTransaction&) = delete;
  // Pins `fd` as `name`. Throws std::runtime_error.
  void pin(int fd, const std::string& name);
  void commit() { committed_ = true; }

 private:
  const InterfacePins& pins_;
  bool committed_ = false;
};

}  // namespace ferry::decap
