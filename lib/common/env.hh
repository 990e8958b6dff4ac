// The process environment as the daemon's knobs read it: one lookup type, so tests pass their own
// environment, and one meaning of a flag.
#pragma once

#include <cstdlib>
#include <string_view>

namespace ferry {

// getenv's signature; a test passes a function over its own table.
using EnvLookup = const char* (*)(const char*);

inline const char* process_env(const char* name) {
  return std::getenv(name);
}

// `lookup`, or the process environment when it is null (the default argument everywhere).
inline EnvLookup env_or_process(EnvLookup lookup) {
  return lookup ? lookup : &process_env;
}

// A flag is set by "1", "on", "true" or "yes"; unset, empty or anything else leaves it off.
inline bool env_flag(const char* name, EnvLookup lookup = nullptr) {
  const char* value = env_or_process(lookup)(name);
  if (value == nullptr) return false;
  const std::string_view v(value);
  return v == "1" || v == "on" || v == "true" || v == "yes";
}

}  // namespace ferry
