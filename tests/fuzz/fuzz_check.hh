// FUZZ_CHECK: an invariant of a fuzz target. A violation traps, so libFuzzer saves the input as a
// crash and the smoke run in `make test` fails, with or without NDEBUG.
#pragma once

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)
