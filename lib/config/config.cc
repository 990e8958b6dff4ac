// load_config/parse_config: file checks, then parse (json_tree) and validate (validate.cc).
// Also ConfigError and the config spellings of the enums.
#include "lib/config/config.hh"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "lib/common/unique_fd.hh"
#include "lib/config/json_tree.hh"
#include "lib/config/validate.hh"

namespace ferry::config {
namespace {

// Line 0 means the error is about the file as a whole ("FILE: message"), as compilers print it.
std::string format_error(const std::string& file, int line, int column,
                         const std::string& message) {
  if (line <= 0) return fmt::format("{}: {}", file, message);
  return fmt::format("{}:{}:{}: {}", file, line, column, message);
}

[[noreturn]] void fail_file(const std::string& path, std::string message) {
  throw ConfigError(path, 0, 0, std::move(message));
}

std::string errno_text(int err) {
  return std::generic_category().message(err);
}

// The daemon runs as root and trusts this file; anyone who can write it can run the gateway.
void check_file_is_trusted(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) fail_file(path, "is not a regular file");
  if (st.st_mode & S_IWOTH) fail_file(path, "is writable by others; chmod go-w it");
  if (st.st_mode & S_IWGRP) fail_file(path, "is writable by its group; chmod go-w it");
  // Its owner can always chmod it writable again: only root or the daemon's own user may own it.
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    fail_file(path, fmt::format("is owned by uid {}, neither root nor the daemon's user; "
                                "chown root it",
                                st.st_uid));
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigBytes) {
    fail_file(path, fmt::format("file is {} bytes; a config may be at most {} bytes (1 MiB)",
                                st.st_size, kMaxConfigBytes));
  }
}

std::string read_config_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO put where the config should be must not hang the daemon.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) fail_file(path, fmt::format("cannot open: {}", errno_text(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    fail_file(path, fmt::format("cannot stat: {}", errno_text(errno)));
  check_file_is_trusted(path, st);
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_file(path, fmt::format("cannot read: {}", errno_text(errno)));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxConfigBytes) {  // the file grew after fstat
      fail_file(path, fmt::format("file is over {} bytes (1 MiB), the most a config may be",
                                  kMaxConfigBytes));
    }
  }
  return text;
}

}  // namespace

ConfigError::ConfigError(std::string file, int line, int column, std::string message)
    : std::runtime_error(format_error(file, line, column, message)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      message_(std::move(message)) {}

Config parse_config(const std::string& text, const std::string& name) {
  Config config = validate_config(parse_json_with_comments(text, name), name);
  config.source_path = name;
  return config;
}

Config load_config(const std::string& path) {
  return parse_config(read_config_file(path), path);
}

std::string_view to_string(Tristate v) {
  switch (v) {
    case Tristate::automatic:
      return "auto";
    case Tristate::on:
      return "on";
    case Tristate::off:
      return "off";
  }
  return "?";
}

std::string_view to_string(XdpMode v) {
  switch (v) {
    case XdpMode::automatic:
      return "auto";
    case XdpMode::native:
      return "native";
    case XdpMode::generic:
      return "generic";
  }
  return "?";
}

std::string_view to_string(IoReadyMode v) {
  switch (v) {
    case IoReadyMode::inbox:
      return "inbox";
    case IoReadyMode::global:
      return "global";
    case IoReadyMode::index:
      return "index";
  }
  return "?";
}

std::string_view to_string(BalancePolicy v) {
  switch (v) {
    case BalancePolicy::maglev:
      return "maglev";
    case BalancePolicy::round_robin:
      return "round_robin";
    case BalancePolicy::least_connections:
      return "least_connections";
  }
  return "?";
}

std::string_view to_string(ServiceMode v) {
  switch (v) {
    case ServiceMode::proxy:
      return "proxy";
    case ServiceMode::echo:
      return "echo";
    case ServiceMode::reflect:
      return "reflect";
  }
  return "?";
}

std::string_view to_string(Affinity v) {
  switch (v) {
    case Affinity::flow:
      return "flow";
    case Affinity::none:
      return "none";
  }
  return "?";
}

std::string_view to_string(Forwarding v) {
  switch (v) {
    case Forwarding::nat:
      return "nat";
    case Forwarding::ipip:
      return "ipip";
    case Forwarding::gue:
      return "gue";
  }
  return "?";
}

std::string_view to_string(HealthCheckType v) {
  switch (v) {
    case HealthCheckType::tcp:
      return "tcp";
    case HealthCheckType::udp:
      return "udp";
    case HealthCheckType::dns:
      return "dns";
    case HealthCheckType::http:
      return "http";
  }
  return "?";
}

std::string_view to_string(DnsQueryType v) {
  switch (v) {
    case DnsQueryType::a:
      return "A";
    case DnsQueryType::ns:
      return "NS";
    case DnsQueryType::soa:
      return "SOA";
    case DnsQueryType::aaaa:
      return "AAAA";
  }
  return "?";
}

std::string server_id_text(const ServerId& id) {
  std::string out;
  for (std::uint8_t b : id) out += fmt::format("{:02x}", b);
  return out;
}

}  // namespace ferry::config
