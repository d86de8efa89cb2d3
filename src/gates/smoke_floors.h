#pragma once

#include <string>

#include "gates/smoke_summary.h"

namespace kiln {

/// A smoke stage's results against the chain's coverage floors.
struct SmokeVerdict {
  bool ok = false;
  std::string reason; // every floor it missed, "; "-separated; empty when ok
};

/// Green only when the output reported results, something ran, nothing failed, at least
/// `min_passed` passed and at most `max_skipped` were skipped, and no count reached
/// k_max_test_count. A run that asserted nothing used
/// to print "All smoke tests passed!" and exit 0; that must read as a failure here.
SmokeVerdict judge_smoke(const SmokeCounts& counts, int min_passed, int max_skipped);

} // namespace kiln
