#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "util/time.h"

namespace kiln {

/// Which runs a prune removes: those beyond the newest `keep`, or those that started more than
/// `older_than_seconds` ago. `kiln records prune` gives one; `[records] keep` is the first.
struct PruneRule {
  std::optional<int> keep;
  std::optional<double> older_than_seconds;
};

/// One run folder as a prune judges it: its id, when it started (the manifest's `started`,
/// else the time in its id), whether its manifest says `running`, and when its manifest was
/// last written (on any clock: it orders runs whose ids name the same second).
struct RunEntry {
  std::string id;
  double started = 0; // seconds since the epoch
  bool running = false;
  double written = 0;
};

/// What a prune decided: the runs the rule selects, and those of them it keeps, each with why.
struct PrunePlan {
  std::vector<std::string> remove; // oldest first
  std::vector<std::string> kept;   // "run <id>: <why>", one per run the rule selected but kept
};

/// Decide which of `runs` (any order) to remove under `rule` at `now`. Never the run `latest`
/// names; never a run whose manifest says `running` unless `lock_held` (the caller holds the
/// records lock, so such a run is dead); `lock_note` says who holds the lock otherwise.
PrunePlan plan_prune(std::vector<RunEntry> runs, const PruneRule& rule, double now,
                     const std::string& latest, bool lock_held, const std::string& lock_note);

/// What prune_records did.
struct PruneOutcome {
  PrunePlan plan;
  std::vector<std::string> removed; // with dry_run: what would be
  uint64_t bytes = 0;               // what their folders took on disk, as `du` counts
  int total = 0;                    // run folders there were
  int forgotten = 0;                // rows the run history held of the removed runs
  std::vector<std::string> errors;  // folders or history rows that could not be removed
};

/// Remove the run folders under `<records>/runs` that `rule` selects (plan_prune()) and their
/// rows in `<records>/history.db`, together. `lock_held`: the caller holds the records lock
/// (driver/records_lock.h); otherwise `lock_note` says why it could not take it. A folder
/// without a manifest.json is no run record and is left alone.
PruneOutcome prune_records(const std::filesystem::path& records, const PruneRule& rule,
                           SystemTime now, bool dry_run, bool lock_held,
                           const std::string& lock_note = "");

} // namespace kiln
