#pragma once

// An invariant a fuzz target checks: when it breaks, it is said on stderr, then the abort
// libFuzzer keeps the input for.

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(ok) ::kiln::fuzz::check_that((ok), #ok)

namespace kiln::fuzz {

inline void check_that(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "broken: %s\n", what);
    std::abort();
  }
}

} // namespace kiln::fuzz
